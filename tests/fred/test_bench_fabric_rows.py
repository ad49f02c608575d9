"""``fred bench fabric`` (``make bench-fabric``) prints the packet fabric as one model and, with
the lock-step simulator, cut in two, in one run, with the machine's load (the lock-step needs
both cores free; docs/fabric_rtl.md, "Simulation speed"). The measurements are replaced by
stand-ins recording what was asked: the rows and the table are what is checked here; the real
runs are the benchmark's."""

import pytest

import studies.benchmarks.fabric_speed as fabric_speed
from fred.cli import main


def _row(fabric, simulator):
    return dict(fabric=fabric, switch="packet", simulator=simulator, cflags="-O1", pgo=False,
                size_flits=100, cycles=1000, sim_s=0.5, cycles_per_s=2000.0, build_s=1.0,
                flits_checked=10, part_wait_s=[])


@pytest.fixture
def asked(monkeypatch):
    calls = []
    monkeypatch.setattr(fabric_speed, "measure",
                        lambda *a, **k: {"meta": {"date": "now", "command": k["command"],
                                                  "load_average": fabric_speed.machine_load()},
                                         "rows": []})
    monkeypatch.setattr(fabric_speed, "measure_packet", lambda name, size, **k: (
        calls.append((name, k["simulator"], k["pgo"])) or _row(f"{name} packet", k["simulator"])))
    return calls


@pytest.mark.parametrize("options, expected", [
    (["--simulator", "lockstep"], [("cocotb", True), ("lockstep", True)]),
    (["--packet-lockstep-pgo"], [("cocotb", True), ("lockstep", True)]),
    (["--no-packet-lockstep-pgo"], [("cocotb", True), ("lockstep", False)]),
    (["--no-pgo", "--packet-lockstep-pgo"], [("cocotb", False), ("lockstep", False)]),
    (["--simulator", "cocotb"], [("cocotb", True)])])
def test_the_packet_fabric_runs_as_one_model_and_on_the_lockstep_simulator(asked, capsys, options,
                                                                           expected):
    # the lock-step row's build is profile-guided unless --no-packet-lockstep-pgo or --no-pgo
    assert main(["bench", "fabric", "--no-mesh", "--fabric", *options]) == 0
    assert asked == [("fred-d", s, pgo) for s, pgo in expected]
    out = capsys.readouterr().out
    assert [line.split()[2] for line in out.splitlines()
            if line.startswith("fred-d packet")] == [s for s, _ in expected]
    assert "load average before the runs" in out
