"""``fred characterize --merge``: a run's records added to an existing characterization, each
record keeping the run that measured it (cheap: no point is measured, the cache is prepared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hdl.contracts.errors import FredError
from studies.characterization.merge import (merge_grid, merge_not_measured, merge_records,
                                             previous_records, record_key)
from studies.characterization.provenance import run_record, source_commit
from studies.characterization.report import build_document, record_runs

ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "data" / "characterization.json"


def _points():
    doc = json.loads(CHECKED_IN.read_text())
    by = {(p["ports"], p["middle"], p["dtype"]): p for p in doc["measurements"]}
    return doc, by[(4, 2, "int32")], by[(4, 3, "fp16")]


def _run(command, date):
    return run_record(command, tools={"verilator": "5.048"}, seed=1, jobs=1, date=date, commit="abc")


def _write_file(path, points, *, grid=None, not_measured=()):
    doc, _, _ = _points()
    built = build_document(points, [], command="fred characterize (old)", grid=grid or dict(doc["grid"], chiplets=[]),
                           not_measured=list(not_measured), tools={}, seconds=None)
    path.write_text(json.dumps(built))
    return built


def test_record_keys_and_replacement():
    _, a, b = _points()
    assert record_key(a) == "timing P4m2int32" and record_key({"name": "rd_microswitch"}) == "cost rd_microswitch"
    newer = dict(a, run=_run("new", "2026-11-23T00:00:00+00:00"), segments=[])
    merged = merge_records([a, b], [newer])
    assert len(merged) == 2 and next(r for r in merged if record_key(r) == record_key(a)) is newer


def test_runs_are_listed_oldest_first_and_a_record_without_its_run_is_refused():
    _, a, b = _points()
    old, new = _run("old", "2026-11-21T00:00:00+00:00"), _run("new", "2026-11-23T00:00:00+00:00")
    runs = record_runs([dict(b, run=new), dict(a, run=old), {"name": "rd_microswitch", "run": new}])
    assert [r["command"] for r in runs] == ["old", "new"]
    assert runs[1]["measured"] == ["timing P4m3fp16", "cost rd_microswitch"]
    bare = {k: v for k, v in a.items() if k != "run"}
    with pytest.raises(FredError, match="P4m2int32 carries no 'run'"):
        record_runs([bare])


def test_grid_union_and_incomparable_points_refused():
    old = {"ports": [4, 8], "middle": [2, 3], "dtypes": ["fp16"], "chiplets": [], "length": 128,
           "backpressure": 0.3, "traffic": ["unicast"]}
    new = dict(old, ports=[12, 10, 4], middle=[3], chiplets=[12, 10])
    merged = merge_grid(old, new)
    assert merged["ports"] == [4, 8, 10, 12] and merged["middle"] == [2, 3] and merged["chiplets"] == [10, 12]
    with pytest.raises(FredError, match="length 128, this run with 64"):
        merge_grid(old, dict(new, length=64))


def test_not_measured_drops_what_the_merge_now_has():
    _, a, _ = _points()
    old = [{"what": "timing P4m2int32", "reason": "old"}, {"what": "Fmax x", "reason": "old"},
           {"what": "cost y", "reason": "old"}]
    new = [{"what": "cost y", "reason": "new"}]
    out = merge_not_measured(old, new, [a], [{"name": "x", "fmax_mhz": 80.0}])
    assert out == [{"what": "cost y", "reason": "new"}]


def test_previous_records_get_the_file_run_when_they_have_none(tmp_path):
    _, a, b = _points()
    path = tmp_path / "c.json"
    legacy = {k: v for k, v in a.items() if k != "run"}
    doc = _write_file(path, [dict(a, run=_run("x", "2026-11-21T00:00:00+00:00")), b])
    raw = json.loads(path.read_text())
    raw["measurements"][0] = legacy                 # as written before runs were recorded
    path.write_text(json.dumps(raw))
    points, costs, grid, missing = previous_records(path)
    assert points[0]["run"]["command"] == doc["generated_by"]["command"]
    assert points[0]["run"]["commit"].startswith("unknown")
    assert points[1]["run"] == b["run"] and costs == [] and grid == doc["grid"]
    with pytest.raises(FredError, match="does not exist"):
        previous_records(tmp_path / "none.json")


def test_cli_merge_adds_the_cached_point_and_keeps_the_file(tmp_path, capsys):
    """The whole option: the file holds P=4 m=2 int32; the cache holds P=4 m=3 fp16 measured
    by another run; ``--merge`` writes both, each with its run, and the model reads the file."""
    from fred.cli import main
    _, a, b = _points()
    out, cache = tmp_path / "c.json", tmp_path / "cache"
    first = _run("fred characterize --first", "2026-11-21T00:00:00+00:00")
    _write_file(out, [dict(a, run=first)], not_measured=[{"what": "timing P4m3fp16", "reason": "later",
                                                           "command": "x"}])
    second = _run("fred characterize --second", "2026-11-22T00:00:00+00:00")
    (cache / "timing").mkdir(parents=True)
    (cache / "timing" / "P4m3fp16.json").write_text(json.dumps(dict(b, run=second)))
    argv = ["characterize", "--ports", "4", "--middle", "3", "--dtypes", "fp16", "--chiplets", "",
            "--cost", "none", "--cache", str(cache), "--output", str(out), "--report", str(tmp_path / "c.md")]
    assert main([*argv, "--merge"]) == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert {(p["ports"], p["middle"], p["dtype"]) for p in doc["measurements"]} == {(4, 2, "int32"), (4, 3, "fp16")}
    assert [r["command"] for r in doc["generated_by"]["runs"]] == ["fred characterize --first",
                                                                   "fred characterize --second"]
    assert "merged into the records already in" in doc["generated_by"]["command"]
    missing = {n["what"] for n in doc["not_measured"]}
    assert "timing P4m3fp16" not in missing          # the file's entry is measured now
    assert "cost rd_microswitch" in missing          # --cost none: said, not filled in
    assert set(doc["switches"]) == {"P4m2int32", "P4m3fp16"}
    assert "come from 2 runs" in (tmp_path / "c.md").read_text()
    assert main([*argv, "--merge", "--fresh"]) != 0
    assert "use one" in capsys.readouterr().err
    assert main([*argv, "--merge", "--length", "64"]) != 0
    assert "not comparable" in capsys.readouterr().err


def test_source_commit_names_the_checkout():
    commit = source_commit()
    assert len(commit.split("+")[0]) == 40 or commit.startswith("unknown")
    assert source_commit(Path("/")).startswith("unknown")
