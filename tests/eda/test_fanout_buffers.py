"""Fanout buffer trees (eda/fanout_buffers.py) on hand-written netlists in yosys' format: every
load keeps exactly one path to its original driver, no net drives more than the limit, and nets
within the limit, the clock and module inputs are left as they were."""

import re
from collections import defaultdict

import pytest

from eda.fanout_buffers import buffer_fanout, liberty_cells, netlist_cells
from hdl.contracts.errors import FredError

CELLS = {"DFFPOSX1": {"area": 384.0, "inputs": {"CLK", "D"}, "outputs": {"Q"}},
         "INVX1": {"area": 64.0, "inputs": {"A"}, "outputs": {"Y"}},
         "BUFX4": {"area": 128.0, "inputs": {"A"}, "outputs": {"Y"}}}


def _netlist(loads: int, *, driver_net: str = "q") -> str:
    lines = ["module top(clk, d, y);", "  input clk;", "  input d;", "  output y;", "  wire q;"]
    lines += ["  DFFPOSX1 _ff_ (", "    .CLK(clk),", "    .D(d),", f"    .Q({driver_net})", "  );"]
    for i in range(loads):
        lines += [f"  INVX1 _inv{i}_ (", f"    .A({driver_net}),", f"    .Y(y{i})", "  );"]
    return "\n".join(lines + ["endmodule", ""])


def _graph(netlist: str):
    """net -> driving instance, instance -> its input nets."""
    driver, inputs = {}, defaultdict(list)
    for cell, name, body in re.findall(r"^  (\w+) (\S+) +\(\n(.*?)\n  \);", netlist, re.M | re.S):
        for pin, net in re.findall(r"\.(\w+)\((.*?)\)", body):
            if pin in CELLS[cell]["outputs"]:
                driver[net] = name
            else:
                inputs[name].append(net)
    return driver, inputs


@pytest.mark.parametrize("loads, limit, buffers, levels", [
    (40, 16, 3, 1),            # ceil(40/16) = 3 buffers on the flop
    (300, 16, 19 + 2, 2),      # 19 buffers of loads, 2 buffers of those 19
    (17, 16, 2, 1),
])
def test_tree_sizes_and_every_load_reaches_the_flop_once(loads, limit, buffers, levels):
    out, added = buffer_fanout(_netlist(loads), CELLS, max_fanout=limit)
    assert added == buffers
    assert netlist_cells(out) == {"DFFPOSX1": 1, "INVX1": loads, "BUFX4": buffers}
    driver, inputs = _graph(out)
    fanout = defaultdict(int)
    for nets in inputs.values():
        for net in nets:
            fanout[net] += 1
    assert max(n for net, n in fanout.items() if net not in ("clk", "d")) <= limit
    for i in range(loads):
        net, hops = inputs[f"_inv{i}_"][0], 0
        while driver[net] != "_ff_":             # walk up through the buffers
            (net,) = inputs[driver[net]]
            hops += 1
        assert hops == levels, i


def test_nets_within_the_limit_are_untouched():
    text = _netlist(16)
    assert buffer_fanout(text, CELLS, max_fanout=16) == (text, 0)


def test_clock_and_module_inputs_are_not_buffered():
    text = _netlist(40, driver_net="q").replace("    .A(q),", "    .A(d),")   # d: a module input
    assert buffer_fanout(text, CELLS, max_fanout=16) == (text, 0)
    many_flops = text.replace("endmodule", "".join(
        f"  DFFPOSX1 _f{i}_ (\n    .CLK(clk),\n    .D(d),\n    .Q(z{i})\n  );\n" for i in range(40)) + "endmodule")
    assert buffer_fanout(many_flops, CELLS, max_fanout=16)[1] == 0


def test_escaped_net_names_keep_their_terminating_space():
    """yosys writes ``\\a.b `` with a space that ends the escaped identifier; a rewritten netlist
    must keep it, or ``.Y(\\a.b)`` swallows the parenthesis."""
    text = _netlist(20, driver_net="\\path.valid ")
    out, added = buffer_fanout(text, CELLS, max_fanout=16)
    assert added == 2
    assert out.count(".A(\\path.valid )") == 2     # the two buffers, nothing else
    assert ".A(\\path.valid)" not in out


def test_errors_name_the_problem():
    with pytest.raises(FredError, match="at least 2"):
        buffer_fanout(_netlist(3), CELLS, max_fanout=1)
    with pytest.raises(FredError, match="buffer cell BUFX9"):
        buffer_fanout(_netlist(3), CELLS, buffer="BUFX9")
    with pytest.raises(FredError, match="cell NAND9X1 is not in the liberty"):
        buffer_fanout(_netlist(3).replace("INVX1 _inv0_", "NAND9X1 _inv0_"), CELLS)


def test_liberty_cells_reads_areas_and_pin_directions():
    cells = liberty_cells("""library(t) {
  cell (INVX1) { area : 64; pin(A) { direction : input; } pin(Y) { direction : output; } }
  cell (NAND2X1) {
    area : 96;
    pin(A) { direction : input; capacitance : 0.01; }
    pin(B) { direction : input; }
    pin(Y) { direction : output; function : "(!(A B))"; }
  }
}""")
    assert cells["NAND2X1"] == {"area": 96.0, "inputs": {"A", "B"}, "outputs": {"Y"}}
    assert cells["INVX1"]["outputs"] == {"Y"}
