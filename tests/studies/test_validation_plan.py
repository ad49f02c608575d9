"""``studies.validation_plan`` and ``fred fabric-validate --plan`` / ``--jobs``: the builds each
case runs on, named before anything is generated or built, and the distinct ones made ahead
(pure Python: no Verilog is generated, no Verilator runs; the builds' ``make`` is replaced
where one is called)."""

from __future__ import annotations

import threading

import pytest

from cocotb_tests.fabric.packet_fabric_sim import PacketBuild, packet_build
from fred.cli import build_parser, main
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import fabric_spec, make_request
from studies.validation_plan import PlannedBuild, build_ahead, case_builds, distinct_builds, plan_rows


def test_a_packet_build_is_its_hardware_routing_and_compile_not_the_fabrics_name():
    """Fred-A and Fred-B are one hardware (in_switch is a property of the programs): one build
    per routing; the controllers, the data format and the routing each make another."""
    a, b = fabric_spec("fred-a"), fabric_spec("fred-b")
    assert PacketBuild(a, True).key() == PacketBuild(b, True).key()
    assert PacketBuild(a, True).key() != PacketBuild(a, False).key()
    assert PacketBuild(a, True).key() != PacketBuild(fabric_spec("fred-a", io_controllers=1), True).key()
    assert PacketBuild(a, True).key() != PacketBuild(fabric_spec("fred-a", dtype="fp16"), True).key()
    # the training's algorithm is part of a profile-guided build only
    assert PacketBuild(a, True, algorithm="ring").key() == PacketBuild(a, True).key()
    assert (PacketBuild(a, True, pgo=True, algorithm="ring").key()
            != PacketBuild(a, True, pgo=True).key())
    # ... and the fabric's default algorithm, which picks the training's programs
    assert PacketBuild(a, True, pgo=True).key() != PacketBuild(b, True, pgo=True).key()
    # the default compile is the plain flags, named as such
    assert PacketBuild(a, True).key() == PacketBuild(a, True, cflags="-O1").key()


def test_packet_build_names_the_routing_the_runner_loads():
    """Rings are online unicasts, in-switch collectives stored phases (the runner's own
    ``packet_build``: ``run_packet_fabric`` builds what it returns)."""
    a, b = fabric_spec("fred-a"), fabric_spec("fred-b")
    ring, _ = packet_build(a, make_request(a, op="all-reduce", size_flits=40, group="wafer"), algorithm="ring")
    tree, program = packet_build(b, make_request(b, op="all-reduce", size_flits=40, group="wafer"))
    assert ring.online and not tree.online
    assert program.algorithm == "in-switch"


def _args(*extra):
    return build_parser("fabric-validate", every=False).parse_args(["fabric-validate", *extra])


def _fig9_packet_builds(fabrics):
    from fred.commands.fabric_validate import _fabrics, _fred_cases
    args = _args("--switch", "packet", "--fabrics", fabrics)
    cases, refused = _fred_cases(args, _fabrics(args))
    assert not refused
    return [case_builds(case, switch="packet") for _, case, _ in cases]


def test_the_packet_fig9_block_needs_one_build_per_fabric_and_routing():
    """32 cases, 4 builds: Fred-A/C run rings and chains online, Fred-B/D in-switch collectives
    from stored phases; every case of a fabric shares its fabric's (the sizes and the
    programs are loaded through the ports)."""
    per_case = _fig9_packet_builds("fred-a,fred-b,fred-c,fred-d")
    assert len(per_case) == 32 and all(len(b) == 1 for b in per_case)
    builds = distinct_builds(per_case)
    assert len(builds) == 4
    assert ["online" in b.what for b in builds] == [True, False, True, False]
    case_rows, build_rows = plan_rows([f"case {i}" for i in range(32)], per_case)
    assert [users for _, users, _ in build_rows] == [8, 8, 8, 8]
    assert [row[2] for row in case_rows] == [str(i // 8 + 1) for i in range(32)]


def test_the_io_block_needs_a_build_per_data_format_and_controller_count():
    """Fred-B's 12 I/O runs: int32 at 40 and 4000 flits, fp16 at 40; the wafer's one
    controller and the DP groups' four are two fabrics: 2 formats x 2 = 4 builds."""
    from fred.commands.fabric_validate import _fabrics, _io_cases
    args = _args("--switch", "packet", "--io", "--fabrics", "fred-b")
    cases, refused = _io_cases(args, _fabrics(args))
    assert len(cases) == 12 and not refused
    per_case = [case_builds(case, switch="packet", backpressure=bp) for _, case, _, bp in cases]
    builds = distinct_builds(per_case)
    assert len(builds) == 4
    assert sorted((b.what.count("fp16"), "4 I/O" in b.what) for b in builds) == [
        (0, False), (0, True), (1, False), (1, True)]


def test_a_concurrent_case_runs_together_then_each_class_alone():
    """``concurrent_runs`` is what ``run_concurrent_case`` runs: one run of the classes
    together, one per class alone; the plan names a build for each run."""
    from studies.concurrent_case import build_concurrent_case, concurrent_runs
    case = build_concurrent_case(fabric="fred-b", scenario="mp-dp-pp", size=40, load_size=400)
    runs, collective_class = concurrent_runs(case)
    assert len(runs) == 1 + len(case.classes) == 4
    assert runs[0][1]["program"] is not None and "vcs" in runs[0][1]
    assert [r for r, _ in runs[1:]] == [cls.request for cls in case.classes]
    assert len(collective_class) == len(runs[0][0].collectives)
    assert len(case_builds(case, switch="packet")) == 4


def test_build_ahead_makes_each_distinct_build_once_at_most_jobs_at_a_time():
    made, running, peak = [], [0], [0]
    lock, gate = threading.Lock(), threading.Barrier(2, timeout=10)

    def make(name):
        def run():
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            gate.wait()            # two builds are running at once, or this times out
            with lock:
                running[0] -= 1
                made.append(name)
        return run
    builds = [PlannedBuild((n,), n, make(n)) for n in "ab"]
    per_case = [[builds[0]], [builds[1]], [builds[0]], [PlannedBuild(("c",), "built when run")]]
    assert build_ahead(per_case, 2, announce=lambda line: None) == 2
    assert sorted(made) == ["a", "b"] and peak[0] == 2
    # one job: each run builds its own, nothing ahead
    assert build_ahead(per_case, 1) == 0 and len(made) == 2
    with pytest.raises(FredError, match="--jobs must be a whole number >= 1, got 0"):
        build_ahead(per_case, 0)


def test_a_failed_build_ahead_raises_its_error():
    def fail():
        raise FredError("fabric build failed (verilator exit 1)")
    with pytest.raises(FredError, match="verilator exit 1"):
        build_ahead([[PlannedBuild(("x",), "x", fail)], [PlannedBuild(("y",), "y", lambda: None)]],
                    2, announce=lambda line: None)


def test_fabric_validate_plan_prints_the_builds_and_runs_nothing(capsys, monkeypatch, tmp_path):
    """``--plan``: the cases and the distinct builds, nothing generated, built or written
    (a build or a run here would fail the test)."""
    import cocotb_tests.fabric.packet_fabric_sim as sim
    monkeypatch.setattr(sim, "build_packet_fabric", lambda build: pytest.fail("built"))
    monkeypatch.setattr(sim, "run_packet_fabric", lambda *a, **k: pytest.fail("ran"))
    out = tmp_path / "doc.md"
    assert main(["fabric-validate", "--switch", "packet", "--fabrics", "fred-a,fred-b",
                 "--output", str(out), "--plan"]) == 0
    text = capsys.readouterr().out
    assert "16 cases, 16 runs, 2 distinct builds" in text
    assert "fred-b MP2-DP5-PP2 PP multicast 4000" in text
    assert not out.exists()
    # the concurrent block on Fred-B: 5 scenarios x 2 sizes, each run together and each class
    # alone; three builds: no controller (MP, DP, PP classes), one controller with stored
    # phases (the I/O stream, the write's scenarios together) and the write alone, a chain
    # routed online
    assert main(["fabric-validate", "--switch", "packet", "--concurrent", "--fabrics", "fred-b",
                 "--output", str(out), "--plan"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("10 cases, 32 runs, 3 distinct builds")
    assert not out.exists()


def test_a_striped_top_is_one_per_fabric_and_npu_kind():
    """Fred-A's chains run io-load and io-store at both sizes on one top (its StripeNpu streams
    and reduces); Fred-B's shared flows need receivers for io-load and tree senders for
    io-store: two tops."""
    from studies.mesh_validation import StripeIoCase
    keys = {(f, label, size): StripeIoCase(f, label, size).top_key()
            for f in ("fred-a", "fred-b") for label in ("wafer io-load", "wafer io-store") for size in (54, 4014)}
    assert len({k for (f, *_), k in keys.items() if f == "fred-a"}) == 1
    assert len({k for (f, *_), k in keys.items() if f == "fred-b"}) == 2
    assert keys[("fred-b", "wafer io-load", 54)] == keys[("fred-b", "wafer io-load", 4014)]


def test_a_striped_top_is_generated_once_per_key(monkeypatch, tmp_path):
    """The 20 MB Verilog of a striped top is generated and looked up in the build cache once
    for the cases on that top (its key), again for another key or without one."""
    import eda.fabric.build as build
    import hdl.emit.verilog as emit
    from cocotb_tests.fabric.stripe_io_run import build_striped_top
    generated = []

    def fake_build(verilog, *args, **keywords):
        folder = tmp_path / verilog
        folder.mkdir()
        (folder / "build.ok").write_text("")
        return folder
    monkeypatch.setattr(emit, "to_verilog", lambda top, name: generated.append(top) or f"v{len(generated)}")
    monkeypatch.setattr(build, "build_top_public_only", fake_build)
    built = [build_striped_top(object(), key).name for key in (("k", 1), ("k", 1), ("k", 2), None)]
    assert built == ["v1", "v1", "v2", "v3"] and len(generated) == 3
    # a folder removed since (make clean) is built again
    (tmp_path / "v1" / "build.ok").unlink()
    assert build_striped_top(object(), ("k", 1)).name == "v4"
