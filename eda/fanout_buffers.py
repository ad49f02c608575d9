"""Fanout buffer trees in a mapped gate-level netlist (the ASIC flow, :mod:`eda.asic`).

ABC buffers the nets inside the logic it maps, but a flip-flop's output is outside its network:
a control register such as a skid buffer's ``valid`` drives every payload bit's multiplexer
(1,542 pins in the RD microswitch) from one DFFPOSX1, and OpenSTA then reports a 27 ns clock-to-Q
that a placement tool would never leave. :func:`buffer_fanout` gives every net driven by a cell
with more than ``max_fanout`` loads a tree of buffers, each driving at most ``max_fanout`` loads,
as a placement tool's repair step would (without placement, so without wire loads).

Netlists are the text yosys ``write_verilog -noattr -noexpr`` writes: one instance per block
``CELL name (\\n .PIN(net),\\n ... \\n );``. Nets are compared as their text. Pin directions
come from the liberty (:func:`liberty_cells`).
"""

from __future__ import annotations

import re
from collections import defaultdict

from hdl.contracts.errors import FredError

__all__ = ["liberty_cells", "buffer_fanout", "netlist_cells"]

_CELL = re.compile(r"^\s*cell\s*\(\s*\"?(\w+)\"?\s*\)\s*\{", re.MULTILINE)
_PIN = re.compile(r"\bpin\s*\(\s*\"?(\w+)\"?\s*\)\s*\{\s*(?:[^{}]*?)direction\s*:\s*(\w+)")
_AREA = re.compile(r"\barea\s*:\s*([0-9.eE+-]+)")
_INSTANCE = re.compile(r"^  (\w+) (\S+) +\(\n(.*?)\n  \);\n", re.MULTILINE | re.DOTALL)
_CONNECTION = re.compile(r"^\s*\.(\w+)\((.*)\),?$")


def liberty_cells(text: str) -> dict[str, dict]:
    """``{cell: {"area": float, "inputs": pin names, "outputs": pin names}}`` of a liberty file's text."""
    starts = [(m.group(1), m.start()) for m in _CELL.finditer(text)]
    cells = {}
    for (name, start), nxt in zip(starts, [s for _, s in starts[1:]] + [len(text)]):
        body = text[start:nxt]
        area = _AREA.search(body)
        pins = _PIN.findall(body)
        cells[name] = {"area": float(area.group(1)) if area else 0.0,
                       "inputs": {pin for pin, direction in pins if direction == "input"},
                       "outputs": {pin for pin, direction in pins if direction == "output"}}
    if not cells:
        raise FredError("liberty: no cells found")
    return cells


def _instances(netlist: str):
    for match in _INSTANCE.finditer(netlist):
        pins = []
        for line in match.group(3).splitlines():
            conn = _CONNECTION.match(line)
            if conn is None:
                raise FredError(f"netlist: cannot read connection {line.strip()!r} of {match.group(2)}")
            pins.append((conn.group(1), conn.group(2)))   # escaped names keep their space
        yield match, match.group(1), match.group(2), pins


def netlist_cells(netlist: str) -> dict[str, int]:
    """Instances by cell type of a netlist."""
    counts: dict[str, int] = defaultdict(int)
    for _, cell, _, _ in _instances(netlist):
        counts[cell] += 1
    return dict(counts)


def buffer_fanout(netlist: str, cells: dict[str, dict], *, max_fanout: int = 16,
                  buffer: str = "BUFX4", skip: tuple = ("clk",)) -> tuple[str, int]:
    """``(netlist with buffer trees, buffers added)``: every net driven by a cell output with
    more than ``max_fanout`` input-pin loads is split into groups of at most ``max_fanout``
    loads, each behind a ``buffer`` (recursively, so each buffer also drives at most
    ``max_fanout``). Nets named in ``skip`` (the ideal clock) and nets driven by module inputs
    are left alone."""
    if max_fanout < 2:
        raise FredError(f"max_fanout must be at least 2, got {max_fanout}")
    if buffer not in cells or len(cells[buffer]["outputs"]) != 1 or len(cells[buffer]["inputs"]) != 1:
        raise FredError(f"buffer cell {buffer} is not a one-input, one-output cell of the liberty")
    (buf_in,), (buf_out,) = cells[buffer]["inputs"], cells[buffer]["outputs"]
    instances = list(_instances(netlist))
    driven, loads = set(), defaultdict(list)        # loads: net -> [(instance index, pin index)]
    for i, (_, cell, _, pins) in enumerate(instances):
        if cell not in cells:
            raise FredError(f"netlist: cell {cell} is not in the liberty")
        for j, (pin, net) in enumerate(pins):
            if pin in cells[cell]["outputs"]:
                driven.add(net)
            elif net:
                loads[net].append((i, j))
    rewired = {}                                    # (instance, pin index) -> new net
    new_cells, new_wires = [], []
    for net, sinks in loads.items():
        if net not in driven or net in skip or len(sinks) <= max_fanout:
            continue
        level = sinks
        while len(level) > max_fanout:
            parents = []
            for k in range(0, len(level), max_fanout):
                wire = f"_fanout{len(new_wires)}_"
                new_wires.append(wire)
                for sink in level[k:k + max_fanout]:
                    rewired[sink] = wire
                index = ("new", len(new_cells))
                new_cells.append([buffer, f"_fanoutbuf{len(new_cells)}_", None, wire])
                parents.append(index)
            level = parents
        for sink in level:
            rewired[sink] = net
    for (origin, k), net in [(s, n) for s, n in rewired.items() if s[0] == "new"]:
        new_cells[k][2] = net
    if not new_cells:
        return netlist, 0
    # the new wires are declared before the first instance uses them
    pieces = [netlist[:instances[0][0].start()], "".join(f"  wire {w};\n" for w in new_wires)]
    last = instances[0][0].start()
    for i, (match, cell, name, pins) in enumerate(instances):
        if not any((i, j) in rewired for j in range(len(pins))):
            continue
        conns = [f"    .{pin}({rewired.get((i, j), net)})" for j, (pin, net) in enumerate(pins)]
        pieces += [netlist[last:match.start()], f"  {cell} {name} (\n" + ",\n".join(conns) + "\n  );\n"]
        last = match.end()
    body = "".join(pieces) + netlist[last:]
    added = "".join(
        f"  {cell} {name} (\n    .{buf_in}({src}),\n    .{buf_out}({dst})\n  );\n"
        for cell, name, src, dst in new_cells)
    end = body.rfind("endmodule")
    if end < 0:
        raise FredError("netlist: no endmodule")
    return body[:end] + added + body[end:], len(new_cells)
