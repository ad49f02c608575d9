"""Hierarchical Verilog (``hdl.emit.hierarchy``): one module per distinct component, named by its
parameters, equivalent to Amaranth's flat output.

Equivalence: a random co-simulation of both builds in one Verilator model (every output compared
every cycle while the switch benches run; default suite), and, where the ``synth`` extra's yosys
is installed, a formal proof (yosys ``equiv_make``/``equiv_struct``/``equiv_induct``).
"""

from __future__ import annotations

import re

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from eda.lint import design_modules, lint
from hdl.contracts.errors import FredError
from hdl.contracts.flit import FlitFormat
from hdl.designs.registry import get_design
from hdl.emit.hierarchy import SeparateModule
from hdl.designs.switch import Demux, FredSwitch, InputMicroswitch, Mux, OutputMicroswitch, RDMicroswitch
from hdl.emit.verilog import to_verilog


def _modules(text: str) -> list[str]:
    return re.findall(r"^module (\S+?)\(", text, re.M)   # plain names: one per distinct component


def _instances(text: str, module: str, of: str) -> int:
    body = re.search(rf"^module {module}\(.*?^endmodule", text, re.S | re.M).group(0)
    return len(re.findall(rf"^  {of} ", body, re.M))


def test_each_distinct_component_is_one_module():
    design = get_design("switch")
    text = to_verilog(design.build(ports=8, middle=3, dtype="fp16", lanes=4), name="fred_switch")
    modules = _modules(text)
    assert len(modules) == len(set(modules))
    assert set(modules) == {
        "fred_switch", "fred_config_memory_m3_p8_k4_w32", "fred_config_check_m3_p8_w192",
        "fred_config_check_m3_p4", "fred_config_check_m3_p2", "fred_m3_p8_fp16x4_t8",
        "fred_m3_p4_fp16x4_t8", "fred_m3_p2_fp16x4_t8", "fred_input_ms_m3_fp16x4_t8",
        "fred_output_ms_m3_fp16x4_t8", "fred_rd_ms_fp16x4_t8", "fred_reduction_fp16x4_sb9"}
    # Fred_3(8): 4 input, 3 Fred_3(4), 4 output; Fred_3(4): 2 input, 3 Fred_3(2), 2 output
    assert _instances(text, "fred_m3_p8_fp16x4_t8", "fred_input_ms_m3_fp16x4_t8") == 4
    assert _instances(text, "fred_m3_p8_fp16x4_t8", "fred_m3_p4_fp16x4_t8") == 3
    assert _instances(text, "fred_m3_p4_fp16x4_t8", "fred_m3_p2_fp16x4_t8") == 3
    assert _instances(text, "fred_m3_p2_fp16x4_t8", "fred_rd_ms_fp16x4_t8") == 1
    # the reduction unit: once in the input and once in the RD microswitch (in their `path`s)
    assert len(re.findall(r"^  fred_reduction_fp16x4_sb9 ", text, re.M)) == 2
    assert _instances(text, "fred_switch", "fred_m3_p8_fp16x4_t8") == 1
    # only the top keeps the `top` attribute (yosys and synthesis tools pick the right top)
    assert text.count("(* top =  1  *)") == 1
    # the flat path writes one module per instance
    flat = to_verilog(design.build(ports=8, middle=3, dtype="fp16", lanes=4), name="fred_switch",
                      flat=True)
    assert len(re.findall(r"^module ", flat, re.M)) > 5 * len(re.findall(r"^module ", text, re.M))


def test_odd_sizes_name_their_demux_mux_and_levels():
    design = get_design("switch")
    text = to_verilog(design.build(ports=10, middle=3, dtype="int32", lanes=1), name="fred_switch")
    modules = set(_modules(text))
    # Fred_3(10) -> Fred_3(5) -> Fred_3(3) -> Fred_3(2); odd levels have the last port's demux/mux
    assert {"fred_m3_p10_int32x1_t8", "fred_m3_p5_int32x1_t8", "fred_m3_p3_int32x1_t8",
            "fred_m3_p2_int32x1_t8", "fred_demux_m3_int32x1_t8", "fred_mux_m3_int32x1_t8"} <= modules
    assert _instances(text, "fred_m3_p10_int32x1_t8", "fred_demux_m3_int32x1_t8") == 0
    assert _instances(text, "fred_m3_p5_int32x1_t8", "fred_demux_m3_int32x1_t8") == 1
    assert _instances(text, "fred_m3_p5_int32x1_t8", "fred_mux_m3_int32x1_t8") == 1
    assert _instances(text, "fred_m3_p5_int32x1_t8", "fred_m3_p3_int32x1_t8") == 3
    second = to_verilog(design.build(ports=10, middle=3, dtype="int32", lanes=1), name="fred_switch")
    assert text == second and "/work/" not in text


class _Twin(SeparateModule, wiring.Component):
    def __init__(self, width):
        self.width = width
        super().__init__({"a": In(width), "b": Out(width)})

    @property
    def module_name(self):
        return "fred_twin"     # deliberately the same name for different widths

    @property
    def module_key(self):
        return ("twin", self.width)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.b.eq(self.a)
        return m


class _Pair(wiring.Component):
    def __init__(self):
        super().__init__({"a": In(8), "b": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.x = x = _Twin(4)
        m.submodules.y = y = _Twin(8)
        m.d.comb += [x.a.eq(self.a), y.a.eq(self.a), self.b.eq(x.b | y.b)]
        return m


def test_one_name_for_two_different_components_is_refused():
    with pytest.raises(FredError, match="both named fred_twin"):
        to_verilog(_Pair(), name="pair")
    assert "module pair" in to_verilog(_Pair(), name="pair", flat=True)


@pytest.mark.verilator
def test_lint_module_by_module_agrees_with_the_whole_file_lint(tmp_path):
    """Both lints are clean on a small odd design, and both catch a seeded fault in a module
    that is instantiated many times (its output left undriven)."""
    design = get_design("switch")
    text = to_verilog(design.build(ports=5, middle=3, dtype="int32", lanes=1), name="fred_switch")
    path = tmp_path / "fred_switch.v"
    path.write_text(text)
    assert len(design_modules(text)) > 10
    for whole in (False, True):
        result = lint(path, whole=whole)
        assert result.returncode == 0, result.stdout + result.stderr
    start = text.index("module fred_output_ms_m3_int32x1_t8(")
    end = text.index("endmodule", start)
    body = re.sub(r"^  assign busy = .*\n", "", text[start:end], count=1, flags=re.M)
    broken = tmp_path / "broken" / "fred_switch.v"
    broken.parent.mkdir()
    broken.write_text(text[:start] + body + text[end:])
    for whole in (False, True):
        result = lint(broken, whole=whole)
        assert result.returncode != 0 and "UNDRIVEN" in result.stdout + result.stderr


def _formal_cases():
    """name -> (factory, in the default suite); yosys takes 5-20 s on each default case, about
    1-7 min on each full-suite one (Fred_3(5): 40,280 $equiv cells)."""
    flit = FlitFormat(dtype="int32", lanes=1, tag_width=2)
    fp = FlitFormat(dtype="fp16", lanes=1, tag_width=2)
    switch = get_design("switch")

    def top(ports):
        return lambda: switch.build(ports=ports, middle=2, dtype="int32", lanes=1, phases=2, tag_width=2)

    return {
        "rd fp16": (lambda: RDMicroswitch(flit=fp), True),
        # input and demux at m3 are the two slowest proofs (about 20 s each in CI): they run with
        # -m full; the default suite proves the same generator on the whole fred_switch P2 m2
        "input m3": (lambda: InputMicroswitch(flit=flit, middle=3), False),
        "output m3": (lambda: OutputMicroswitch(flit=flit, middle=3), True),
        "demux m3": (lambda: Demux(flit=flit, middle=3), False),
        "mux m3": (lambda: Mux(flit=flit, middle=3), True),
        "fred_switch P2 m2": (top(2), True),
        "fred_switch P3 m2": (top(3), False),
        **{f"Fred_{m}({p})": ((lambda p=p, m=m: FredSwitch(ports=p, middle=m, flit=flit)), False)
           for p, m in ((3, 2), (4, 2), (5, 3))},
    }


@pytest.mark.parametrize("case", [pytest.param(name, marks=() if default else pytest.mark.full)
                                  for name, (_, default) in _formal_cases().items()])
def test_flat_and_hierarchical_are_formally_equivalent(case):
    from eda.equivalence import check_equivalent
    make = _formal_cases()[case][0]
    result = check_equivalent(to_verilog(make(), name="dut", flat=True), to_verilog(make(), name="dut"),
                              "dut")
    print(f"{case}: {result.proven} of {result.cells} $equiv cells proven")
    assert result.equivalent, "\n".join(l for l in result.log.splitlines() if "Unproven" in l)


def test_the_equivalence_check_finds_a_difference():
    """One operator changed in one module of the hierarchical text: not equivalent."""
    from eda.equivalence import check_equivalent
    flit = FlitFormat(dtype="int32", lanes=1, tag_width=2)
    gold = to_verilog(FredSwitch(ports=2, middle=2, flit=flit), name="dut", flat=True)
    gate = to_verilog(FredSwitch(ports=2, middle=2, flit=flit), name="dut")
    mutant = gate.replace("assign a__valid = in0__valid & reduce;", "assign a__valid = in0__valid | reduce;")
    assert mutant != gate
    assert not check_equivalent(gold, mutant, "dut").equivalent


@pytest.mark.cocotb
# Under -m full (CI time; session 25: CI reached 1,194 s of its 1,200): the flat and
# hierarchical Verilog are proven equal formally in the default suite
# (test_flat_and_hierarchical_are_formally_equivalent, and the check is shown to find a
# difference); this cosimulation costs two Verilator builds per parameter set (P = 4 fp16 36 s
# of CPU in a fresh clone, Fred_3(5) about 50 s). Fred_3(3): Fred_3(5)'s hierarchy holds three.
@pytest.mark.full
@pytest.mark.parametrize("ports,middle,dtype", [(4, 2, "fp16"), (3, 3, "int32"), (5, 3, "int32")])
def test_flat_and_hierarchical_agree_in_cosimulation(ports, middle, dtype):
    """The switch benches (random flow sets with idle inputs and backpressure, the configuration
    protocol) on both builds at once: every output equal in every cycle."""
    from cocotb_tests.cosim import cosim_verilog
    from cocotb_tests.runner import run_bench
    from hdl.contracts.config_port import config_words
    from hdl.contracts.timing import switch_latency
    params = {"ports": ports, "middle": middle, "dtype": dtype, "lanes": 1, "phases": 3,
              "tag_width": 16}
    verilog = cosim_verilog(lambda: get_design("switch").build(**params))
    bench = dict(params, latency=switch_latency(ports=ports, middle=middle, dtype=dtype),
                 config_words=config_words(ports, middle), rounds=20, max_length=40,
                 idle=0.3, backpressure=0.3)
    cycles = 0
    for testcase in ("random_flow_sets", "configuration_protocol"):
        result = run_bench(verilog=verilog, test_module="cocotb_tests.bench_switch",
                           testcase=testcase, bench_params=bench,
                           run_name=f"cosim-{testcase}-P{ports}m{middle}{dtype}")
        cycles += sum(v for k, v in result.metrics.items() if k.endswith("_cosim_cycles"))
    print(f"P={ports} m={middle} {dtype}: flat and hierarchical agree on every output for {cycles} cycles")
    assert cycles > 1000
