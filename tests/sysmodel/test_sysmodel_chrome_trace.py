"""The executed schedule as a Chrome trace-event file (``--trace`` of fred sweep/eval/validate):
it loads, every event lies within its iteration, one track per engine resource."""

import json

import pytest

from fred.cli import main
from hdl.contracts.errors import FredError
from sysmodel.chrome_trace import TraceRecorder, check_writable, executed_iteration
from sysmodel.platform import default_platform
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload


def check_trace(path) -> dict:
    """Load a trace file and check its shape; returns {pid: (iteration, tracks, events)}."""
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    out = {}
    for it in data["otherData"]["iterations"]:
        pid = it["pid"]
        mine = [e for e in events if e["pid"] == pid]
        tracks = {e["tid"]: e["args"]["name"] for e in mine if e["name"] == "thread_name"}
        assert len(set(tracks.values())) == len(tracks)          # one track per resource
        complete = [e for e in mine if e["ph"] == "X"]
        assert len(complete) == it["tasks"]
        makespan_us = it["makespan_s"] * 1e6
        per_track: dict = {}
        for e in complete:
            assert e["tid"] in tracks and e["cat"] in ("compute", "mp", "pp", "dp", "io")
            assert 0 <= e["ts"] and e["dur"] >= 0
            assert e["ts"] + e["dur"] <= makespan_us * (1 + 1e-9) + 1e-3
            per_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
        for spans in per_track.values():                         # a resource runs one task at a time
            spans.sort()
            assert all(b[0] >= a[1] - 1e-3 for a, b in zip(spans, spans[1:]))
        out[pid] = (it, tracks, complete)
    return out


def test_trace_of_a_pipeline_has_one_track_per_stage_resource(tmp_path):
    platform, wl = default_platform(), get_workload("transformer-17b")   # MP3-DP3-PP2
    rec = TraceRecorder(tmp_path / "t.json")
    rec.add("t17b fred-c", platform, "fred-c", wl)
    rec.write()
    (it, tracks, complete), = check_trace(tmp_path / "t.json").values()
    plan, executed = executed_iteration(platform, "fred-c", wl)
    assert sorted(tracks.values()) == sorted(
        f"stage {r[1:].split('.')[0]} (NPU {plan.representative(int(r[1:].split('.')[0]))}) {r.split('.', 1)[1]}"
        for r in {t.resource for t in executed.tasks})
    assert len(tracks) == 2 * 4                                  # compute, MP, PP, DP per stage
    # the same iteration as the model reports (its steady part)
    r = simulate_iteration(platform, "fred-c", wl)
    assert it["makespan_s"] == pytest.approx(r.steady_time_s, rel=1e-9)
    assert {e["cat"] for e in complete} == {"compute", "mp", "pp", "dp"}


def test_trace_of_weight_streaming_has_the_io_channels(tmp_path):
    rec = TraceRecorder(tmp_path / "t.json")
    rec.add("gpt-3 mesh", default_platform(), "mesh", get_workload("gpt-3"))
    rec.write()
    (it, tracks, complete), = check_trace(tmp_path / "t.json").values()
    assert any(name.endswith("io.in") for name in tracks.values())
    assert "io" in {e["cat"] for e in complete}


def test_bad_trace_path_fails_before_the_work(tmp_path):
    with pytest.raises(FredError, match="does not exist"):
        check_writable(tmp_path / "missing" / "t.json")
    with pytest.raises(FredError, match="is a directory"):
        check_writable(tmp_path)


def test_cli_trace_options(tmp_path, capsys):
    t = tmp_path / "sweep.json"
    assert main(["sweep", "--workload", "transformer-17b", "--fabric", "fred-c", "--strategy",
                 "MP3-DP3-PP2", "--json", "--trace", str(t)]) == 0
    assert len(check_trace(t)) == 1
    json.loads(capsys.readouterr().out)                          # stdout stays JSON
    v = tmp_path / "validate.json"
    assert main(["validate", "--only", "megatron-22b", "--json", "--trace", str(v)]) == 0
    assert [it["label"] for it, _, _ in check_trace(v).values()] == ["megatron-22b/full", "megatron-22b/seqsel"]
    capsys.readouterr()
    # an unwritable path: one line naming it, before any iteration runs
    assert main(["eval", "--no-files", "--trace", str(tmp_path / "no" / "e.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "no" / "e.json") in err[0]


def test_eval_trace_has_one_process_per_workload_and_fabric(tmp_path):
    from fred.commands.eval import _trace
    from studies.evaluation import FRED_FABRICS
    from sysmodel.workloads import WORKLOADS
    rec = TraceRecorder(tmp_path / "e.json")
    _trace(rec, default_platform(), overlap=True)
    labels = [it["label"] for it, _, _ in check_trace(tmp_path / "e.json").values()]
    assert labels == [f"{w} on {f}" for w in WORKLOADS for f in ("mesh", *FRED_FABRICS)]
