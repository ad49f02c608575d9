"""Quick checks of the verification-measurement tools (docs/verification.md; no simulator): the mutant
generator is reproducible and every mutant changes the design, functional-coverage bins and
merging, the Verilator coverage reader and merger. The figures themselves come from
`make coverage` and `make mutation` (docs/verification.md)."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest
import yaml

from eda import code_coverage
from studies.verification import mutation
from cocotb_tests.lib import coverage


@functools.lru_cache(maxsize=None)
def _verilog():
    return mutation.design_verilog()


def test_mutants_are_reproducible_and_each_changes_exactly_one_line():
    verilog, _ = _verilog()
    candidates = mutation.sites(verilog)
    first = mutation.choose(candidates, 60, seed=18)
    again = mutation.choose(mutation.sites(_verilog()[0]), 60, seed=18)
    assert first == again and len(first) == 60
    assert mutation.choose(candidates, 60, seed=19) != first
    assert len({m.key for m in first}) == 60, "a mutant was drawn twice"
    original = verilog.split("\n")
    for m in first:
        mutated = m.apply(verilog).split("\n")
        changed = [i for i, (a, b) in enumerate(zip(original, mutated)) if a != b]
        assert len(mutated) == len(original) and changed == [m.line - 1], m
        assert mutated[m.line - 1] == m.after != m.before


def test_mutants_reach_every_module_and_several_operators():
    verilog, _ = _verilog()
    candidates = mutation.sites(verilog)
    modules = {c.module for c in candidates}
    chosen = mutation.choose(candidates, 60, seed=18)
    # round-robin over modules: 60 mutants of 26 modules hit every module at least twice
    assert {m.module for m in chosen} == modules
    assert len({m.operator for m in chosen}) >= 6
    assert {"fred_reduction_int32x1_sb17.lane0", "fred_config_memory_m2_p4_k3_w32"} <= modules


def test_mutation_operators_on_hand_written_lines():
    text = "\n".join([
        "module m(a);",
        "  wire [3:0] mode;",
        "  assign \\$1  = a & b;",
        "  assign \\$2  = ~ stage0_valid;",
        "  assign \\$3  = a + b;",
        "  assign \\$4  = p ? x : y;",
        "  assign \\$5  = mode[1:0] == 1'h1;",
        "  always @* begin",
        "    if (stage0_ready) begin",
        "      \\$6  = 1'h1;",
        "    end",
        "    if (rst) begin",
        "      \\$6  = 1'h0;",
        "    end",
        "  end",
        "  assign out = \\$1  ^ \\$2  ^ \\$3  ^ \\$4  ^ \\$5 ;",
        "  assign \\dead.view  = mode[0];",
        "endmodule",
    ])
    got = {(m.line, m.operator): m.after.strip() for m in mutation.sites(text)}
    assert got[(3, "and-or")] == "assign \\$1  = a | b;"
    assert got[(4, "drop-not")] == "assign \\$2  = stage0_valid;"
    assert got[(5, "add-xor")] == "assign \\$3  = a ^ b;"
    assert got[(6, "ternary-swap")] == "assign \\$4  = p ? y : x;"
    assert got[(7, "slice-shift")] == "assign \\$5  = mode[2:1] == 1'h1;"
    assert got[(7, "cmp")] == "assign \\$5  = mode[1:0] != 1'h1;"
    assert got[(9, "if-negate")] == "if (!(stage0_ready)) begin"
    assert got[(10, "const-flip")] == "\\$6  = 1'h0;"
    # reset conditions and reset values are not mutated, nor a wire nothing reads
    assert not any(line in (12, 13, 17) for line, _ in got)


def test_named_port_connection_is_not_a_read_of_the_wire_of_that_name():
    # `.select__1(mode[3])` reads mode, not the local wire select__1 (a dead wire Yosys keeps);
    # `.en(en)` does read the wire en
    text = "\n".join([
        "module m(mode, a, b);",
        "  wire select__1;",
        "  wire en;",
        "  assign select__1 = a & b;",
        "  assign en = a | b;",
        "  sub u (",
        "    .select__1(mode[3]),",
        "    .\\o__ready$32 (mode[0]),",
        "    .en(en)",
        "  );",
        "endmodule",
    ])
    got = {(m.line, m.operator) for m in mutation.sites(text)}
    assert got == {(5, "or-and")}


def test_a_timed_out_mutant_run_ends_its_whole_process_group(tmp_path):
    # a command that starts a child which would outlive it (as a simulator started by the
    # cocotb runner does); after the timeout neither may be left running
    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    started = time.monotonic()
    # 3 s: time for sh to start its child on a loaded machine before the timeout ends both
    assert mutation.run_limited(["sh", "-c", script], timeout=3) is None
    assert time.monotonic() - started < 20
    assert pid_file.exists(), "sh did not start its child within the timeout"
    child = int(pid_file.read_text())
    status = Path(f"/proc/{child}/status")

    def running() -> bool:
        try:
            return "\tZ" not in status.read_text()
        except FileNotFoundError:
            return False
    # the kernel closes a killed process's pipes (which run_limited waits for) before its exit
    # completes: seen once on a fresh clone, the grandchild read as "R" in between. It has been
    # sent the signals; give its exit up to 5 s to finish, then it must not run.
    deadline = time.monotonic() + 5
    while running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not running(), "the grandchild still runs"
    assert mutation.run_limited(["sh", "-c", "echo hi; exit 3"], timeout=10) == (3, "hi\n", "")


def test_apply_refuses_verilog_it_was_not_made_from():
    verilog, _ = _verilog()
    m = mutation.choose(mutation.sites(verilog), 1, seed=18)[0]
    with pytest.raises(ValueError, match="another version"):
        m.apply(verilog.replace(m.before, m.before + " "))


def test_legal_modes_hand_counted():
    # input, m = 3: idle, in0 alone (3 wires), in1 alone (3), both on different wires (3 x 2),
    # reduce onto one wire (3) = 16; output: each of out0/out1 off or from one of 3 wires = 16;
    # RD: 4 x 4 minus the 4 that mix a sum with a pass = 12; demux/mux: idle + 3 wires
    assert len(coverage.legal_modes("input", 3)) == 16
    assert len(coverage.legal_modes("output", 3)) == 16
    assert len(coverage.legal_modes("rd", 3)) == 12
    assert len(coverage.legal_modes("demux", 3)) == len(coverage.legal_modes("mux", 3)) == 4
    assert len(coverage.legal_modes("input", 2)) == 9    # 1 + 2 + 2 + 2 + 2
    assert "in0+in1 -> wire 2" in coverage.legal_modes("input", 3)


def test_levels_and_flow_shapes():
    lv = coverage.levels(12, 3)
    assert lv["in[0]"] == (0, 12, "input")
    assert lv["mid[2].mid[0].demux"] == (2, 3, "demux")
    assert lv["mid[0].mid[1].mid[2].rd"] == (3, 2, "rd")
    assert coverage.flow_shape((3,), (5,)) == ("unicast", 1)
    assert coverage.flow_shape((3,), (0, 1, 2)) == ("multicast", 3)
    assert coverage.flow_shape((0, 1), (1, 0)) == ("all-reduce", 2)
    assert coverage.flow_shape((0, 1, 2), (4,)) == ("reduce", 3)
    assert coverage.flow_shape((0, 1), (2, 3)) == ("reduce-multicast", 2)


def test_functional_coverage_is_written_merged_and_reported(tmp_path):
    from hdl.contracts.encoding import SwitchConfig
    cov = coverage.SwitchCoverage(3, 2)   # Fred_2(3): a name no bench of this process uses
    cov.sample_config(SwitchConfig.idle(3, 2))
    cov.sample_flow((0,), (1,))
    first = cov.write(tmp_path / "a.yml")
    db = yaml.safe_load(first.read_text())
    point = "fred.P3m2.flows.shape_size"
    hits = db[point]["bins:_hits"]
    assert hits["unicast/1"] >= 1 and hits["multicast/2"] == 0
    # a second run that hit a multicast of 2 (hits edited as another run would have written them)
    second = dict(db)
    second[point] = dict(db[point], **{"bins:_hits": dict(hits, **{"multicast/2": 3,
                                                                    "unicast/1": 0})})
    (tmp_path / "b.yml").write_text(yaml.dump(second))
    merged = coverage.merge([first, tmp_path / "b.yml"], tmp_path / "m.yml")
    lines, data = coverage.report(coverage.load(merged), root="fred.P3m2")
    merged_hits = coverage.load(merged)[point]["bins:_hits"]
    assert merged_hits["multicast/2"] == 3 and merged_hits["unicast/1"] >= 1
    covered, size = data["points"][point]
    assert size == 1 + 2 + 2 + 2 + 1 and covered == 2   # unicast/1, multicast 2..3, ...
    assert (point, "reduce/2", "") in data["holes"]
    assert any(line.startswith("fred.P3m2.flows") for line in lines)
    # every idle microswitch mode was sampled once at its level
    assert data["points"]["fred.P3m2.modes.L1_P2.rd"] == (1, 12)


def test_code_coverage_reader_merges_and_groups_by_module(tmp_path):
    def point(module, kind, line, what, count):
        key = (f"\x01f\x02{tmp_path / 'd.v'}\x01l\x02{line}\x01t\x02{kind}\x01page\x02"
               f"v_{kind}/{module}\x01o\x02{what}\x01h\x02top")
        return f"C '{key}' {count}"
    (tmp_path / "d.v").write_text("a\n  if (x) begin\n  assign y = z;\n")
    (tmp_path / "1.dat").write_text("\n".join(["# SystemC::Coverage-3",
                                               point("m1", "line", 2, "if", 0),
                                               point("m1", "line", 3, "block", 4),
                                               point("m1", "toggle", 3, "y:0->1", 0)]) + "\n")
    (tmp_path / "2.dat").write_text("\n".join(["# SystemC::Coverage-3",
                                               point("m1", "line", 2, "if", 0),
                                               point("m1", "toggle", 3, "y:0->1", 2)]) + "\n")
    points = code_coverage.merge([tmp_path / "1.dat", tmp_path / "2.dat"])
    table = code_coverage.per_module(points)
    assert table["m1"] == {"line": [1, 2], "toggle": [1, 1]}
    missed = code_coverage.uncovered_lines(points)
    assert [(m, line, text) for m, _, line, _, text in missed] == [("m1", 2, "if (x) begin")]
    written = code_coverage.write(points, tmp_path / "merged.dat")
    assert code_coverage.read(written) == points
    lines, data = code_coverage.report(points, artefacts=[("if (x)", "never")])
    assert data["excluded"] == {"m1": 1} and data["uncovered"] == []


class _Handle:
    def __init__(self, value=0):
        self.value = value


class _FakeSwitch:
    """The ports SwitchCoverageProbe reads, as plain attributes a test sets cycle by cycle."""

    def __init__(self, ports):
        for name in ("error", "busy", "config__valid", "config__ready", "config__payload",
                     "phase__valid", "active_phase", "active_valid"):
            setattr(self, name, _Handle())
        for n in range(ports):
            for d in ("i", "o"):
                for s in ("valid", "ready"):
                    setattr(self, f"{d}__{n}__{s}", _Handle())


def test_probe_samples_accepted_configurations_and_stall_episodes():
    """The probe counts a configuration's modes only once the switch accepted it (error NONE
    two cycles after `last`), and a broadcast-with-one-output-stalled episode once per episode."""
    from hdl.contracts.encoding import layout
    from hdl.compiler.flows import Flow
    from hdl.compiler.router import route
    from hdl.contracts.config_port import ConfigError, config_word_layout
    cov = coverage.SwitchCoverage(6, 2)   # a size no other test of this process uses
    dut = _FakeSwitch(6)
    flows = [((0,), (0, 1, 2))]
    in_flight = [0]
    probe = coverage.SwitchCoverageProbe(dut, cov, word_layout=config_word_layout(3),
                                         flows=lambda: flows, in_flight=lambda: in_flight[0])
    config = route(ports=6, middle=2, flows=[Flow(inputs=(0,), outputs=(0, 1, 2))],
                   split=False).phases[0].config
    words = config.encode()
    layout_ = config_word_layout(3)
    cycle = 0

    def step(**values):
        nonlocal cycle
        for name, value in values.items():
            getattr(dut, name).value = value
        probe._sample(cycle)
        cycle += 1

    # a packet the switch rejects: nothing sampled
    for i, w in enumerate(words):
        step(config__valid=1, config__ready=1,
             config__payload=layout_.pack(data=w, last=i == len(words) - 1, phase=1))
    step(config__valid=0)
    step(error=ConfigError.ILLEGAL_MODE)
    step()
    assert probe.accepted == 0 and probe.loaded == {}
    # the same packet accepted: every microswitch's mode counted once at its level
    for i, w in enumerate(words):
        step(config__valid=1, config__ready=1,
             config__payload=layout_.pack(data=w, last=i == len(words) - 1, phase=1))
    step(config__valid=0, error=ConfigError.NONE)
    step()
    assert probe.accepted == 1 and probe.loaded == {1: config}
    db = __import__("cocotb_coverage.coverage", fromlist=["coverage_db"]).coverage_db
    counted = sum(sum(db[f"fred.P6m2.modes.{g}"].detailed_coverage.values())
                  for g in ("L0_P6.input", "L0_P6.output", "L1_P3.input", "L1_P3.output",
                            "L1_P3.demux", "L1_P3.mux", "L2_P2.rd"))
    assert counted == len(layout(6, 2))
    # phase 1 active; output 0 holds a flit it cannot deliver while output 1 is ready:
    # one episode, however many cycles it lasts, and a new one after it ends
    situation = db["fred.P6m2.backpressure.situation"]
    step(active_valid=1, active_phase=1, o__0__valid=1, o__0__ready=0, o__1__ready=1)
    step()
    step()
    assert situation.detailed_coverage["broadcast-output-stalled"] == 1
    step(o__0__ready=1)
    step(o__0__ready=0)
    assert situation.detailed_coverage["broadcast-output-stalled"] == 2
    # a select offered while flits are in flight
    in_flight[0] = 3
    step(phase__valid=1)
    assert db["fred.P6m2.phase.event"].detailed_coverage["select-in-flight"] == 1
    assert situation.detailed_coverage["select-while-draining"] == 1


def test_mutation_table_cells():
    """The survivors table: a ``|`` of the Verilog is escaped in the code cells and replaced in
    the killed-by cell (a Markdown cell), failing tests are joined, earlier runs (``--rerun``)
    are named, and a mutant without an outcome is *not run*."""
    mutants = [mutation.Mutant("m.sub", 3, "or-and", "  assign a = b | c;", "assign a = b & c;"),
               mutation.Mutant("top", 9, "cmp", "x == y", "x != y")]
    results = {0: {"status": "killed", "by": ["t1", "t2"],
                   "previous": [{"status": "survived", "bench": "abc"},
                                {"status": "killed", "timeout": True}]}}
    lines = mutation.markdown_table(mutants, results).split("\n")
    assert lines[:2] == ["| # | operator | module | change | outcome | killed by |", "|---|---|---|---|---|---|"]
    assert lines[2] == ("| 0 | or-and | `m.sub` | `assign a = b \\| c;` -> `assign a = b & c;` | killed | "
                        "t1, t2 (earlier run: survived, bench abc) (earlier run: killed by the timeout) |")
    assert lines[3] == "| 1 | cmp | `top` | `x == y` -> `x != y` | not run |  |"
    results = {1: {"status": "killed", "by": "simulator crash | signal 11"}}
    assert mutation.markdown_table(mutants, results).split("\n")[3].endswith(
        "| killed | simulator crash / signal 11 |")
