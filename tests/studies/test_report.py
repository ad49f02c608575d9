"""studies/report.py, the one writer of the studies' files, and the typed results it writes:
dataclass -> JSON, Markdown tables, CSV, atomic writes, errors naming the path; the console
tables of the commands read result fields, so a renamed field fails here, not at print time."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hdl.contracts.errors import FredError
from studies.report import (OMIT_NONE, Column, Markdown, check_writable, csv_text, replace_marked_block,
                            table_lines, to_json_dict, write_csv, write_json, write_text)


@dataclass(frozen=True)
class _Inner:
    name: str
    value: float


@dataclass(frozen=True)
class _Outer:
    title: str
    rows: list
    by_name: dict
    pair: tuple
    maybe: float | None = field(default=None, metadata=OMIT_NONE)
    kept_none: float | None = None


class _HasToDict:
    def to_dict(self):
        return {"own": "form"}


def test_dataclass_json_round_trip():
    """Fields become keys, recursively; OMIT_NONE drops a None key, a plain None stays null;
    tuples become lists, infinity stays a float; objects with to_dict() use it."""
    obj = _Outer("t", [_Inner("a", 1.5), _Inner("b", math.inf)], {"x": _Inner("c", 0.0)}, (1, 2))
    data = to_json_dict(obj)
    assert data == {"title": "t", "rows": [{"name": "a", "value": 1.5}, {"name": "b", "value": math.inf}],
                    "by_name": {"x": {"name": "c", "value": 0.0}}, "pair": [1, 2], "kept_none": None}
    back = json.loads(json.dumps(data))
    rebuilt = _Outer(back["title"], [_Inner(**r) for r in back["rows"]],
                     {k: _Inner(**v) for k, v in back["by_name"].items()}, tuple(back["pair"]))
    assert rebuilt == obj
    assert to_json_dict(dataclasses.replace(obj, maybe=2.0))["maybe"] == 2.0
    assert to_json_dict({"k": _HasToDict()}) == {"k": {"own": "form"}}
    with pytest.raises(TypeError, match="cannot write object"):
        to_json_dict(object())


def test_markdown_table_formats_columns_from_fields_indices_and_functions():
    rows = [_Inner("a", 1.25), _Inner("b", 2.0)]
    lines = table_lines([Column("name", "name"), Column("value", "value", ".1f", rule="---:"),
                         Column("twice", lambda r: 2 * r.value, lambda v: f"{v:g}")], rows)
    assert lines == ["| name | value | twice |", "|---|---:|---|", "| a | 1.2 | 2.5 |", "| b | 2.0 | 4 |"]
    assert table_lines(["a", "b"], [(1, "x")]) == ["| a | b |", "|---|---|", "| 1 | x |"]
    doc = Markdown().heading("T", 1).paragraph("p").table(["a"], [(1,)]).image("alt", "x.png")
    assert doc.text() == "# T\n\np\n\n| a |\n|---|\n| 1 |\n\n![alt](x.png)\n"
    with pytest.raises(AttributeError):   # a renamed field fails when the table is built
        table_lines([Column("v", "valeu")], rows)


def test_markdown_bullets_take_the_list_marker():
    """The default marker is ``*``; a document written with ``-`` lists keeps its marker."""
    doc = Markdown().heading("L").bullets(["a", "b"]).bullets(["c"], marker="-")
    assert doc.text() == "## L\n\n* a\n* b\n\n- c\n"


def test_csv_from_dataclasses_dicts_and_sequences(tmp_path):
    text = csv_text([_Inner("a", 1.0), {"name": "b"}])
    assert text == "name,value\r\na,1.0\r\nb,\r\n"
    assert csv_text([("x", 2)], ["name", "value"], formats={"value": lambda v: f"{v:.2f}"}) == \
        "name,value\r\nx,2.00\r\n"
    path = write_csv(tmp_path / "a.csv", [_Inner("a", 1.0)])
    assert path.read_bytes() == b"name,value\r\na,1.0\r\n"
    with pytest.raises(ValueError, match="one cell per field"):
        csv_text([("x",)], ["name", "value"])


def test_writes_are_atomic_and_keep_the_old_file_on_failure(tmp_path, monkeypatch):
    path = write_json(tmp_path / "sub" / "r.json", _Inner("a", 1.0))
    assert json.loads(path.read_text()) == {"name": "a", "value": 1.0}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]     # no temporary left behind

    def broken(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(FredError, match=r"cannot write .*r\.json: No space left on device"):
        write_text(path, "new")
    assert json.loads(path.read_text()) == {"name": "a", "value": 1.0}   # the old file intact
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_unwritable_folder_is_named_before_the_work(tmp_path, monkeypatch):
    """A folder the process may not write into is named before any work. The permission is
    what ``os.access`` reports (root may write anywhere, so it is simulated here rather than set
    with chmod, which would make the test pass vacuously as root)."""
    import studies.report as report
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(report.os, "access", lambda p, mode: Path(p) != locked and real_access(p, mode))
    with pytest.raises(FredError, match="locked.* is not writable"):
        check_writable(locked / "out" / "x.md")
    assert check_writable(tmp_path / "free" / "x.md") == tmp_path / "free" / "x.md"


def test_unwritable_paths_are_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(FredError, match=r"cannot write .*file/x\.md: .*file is a file, not a folder"):
        check_writable(tmp_path / "file" / "x.md")
    with pytest.raises(FredError, match="it is a file, not a folder"):
        check_writable(tmp_path / "file", folder=True)
    with pytest.raises(FredError, match="it is a folder"):
        check_writable(tmp_path)
    assert check_writable(tmp_path / "new" / "deeper" / "x.md") == tmp_path / "new" / "deeper" / "x.md"
    assert not (tmp_path / "new").exists()


def test_cli_unwritable_output_fails_before_the_work(tmp_path, capsys):
    """``fred eval -o`` into a file: one line naming the path, and no work done."""
    from fred.cli import main
    (tmp_path / "taken").write_text("")
    assert main(["eval", "-o", str(tmp_path / "taken"), "--no-diagnostic"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fred eval: error: cannot write into {tmp_path / 'taken'}: it is a file, not a folder"]


def test_marked_block_is_replaced_keeping_the_text_around(tmp_path):
    doc = tmp_path / "d.md"
    replace_marked_block(doc, "<!-- b -->", "<!-- e -->", "<!-- b -->\none\n<!-- e -->", new_document_head="# D\n\n")
    assert doc.read_text() == "# D\n\n<!-- b -->\none\n<!-- e -->\n"
    doc.write_text("head\n<!-- b -->\nold\n<!-- e -->\ntail\n")
    replace_marked_block(doc, "<!-- b -->", "<!-- e -->", "<!-- b -->\ntwo\n<!-- e -->")
    assert doc.read_text() == "head\n<!-- b -->\ntwo\n<!-- e -->\ntail\n"


# -- the typed results and the console tables that read them ------------------------------------
def _eval_summary():
    from studies.evaluation import (Calibration, EvaluationResult, Explanation, ImpliedComputeScale,
                                    PAPER_SPEEDUP, Spread, SweepComparison, SweepSummary)
    from sysmodel.workloads import WORKLOADS
    fabrics = ("mesh", "fred-a", "fred-b", "fred-c", "fred-d")
    speedup = {f: {w: 1.0 + i / 10 for w in WORKLOADS} for i, f in enumerate(fabrics[1:])}
    explanation = {w: Explanation(mesh_time_s=1.0, compute_fraction_of_mesh_iteration=0.5,
                                  exposed_comm_s={f: 0.1 for f in fabrics}, bubble_s={f: 0.0 for f in fabrics},
                                  text="t") for w in WORKLOADS}
    summaries = {"transformer-17b/mesh": SweepSummary("MP1-DP1-PP20", 0.01, "MP1-DP1-PP20", 0.001, 18, 18),
                 "transformer-17b/fred-d vs mesh": SweepComparison(1.5, 1.1, 18)}
    return EvaluationResult(
        speedup=speedup, explanation=explanation, paper_speedup=PAPER_SPEEDUP, iterations={},
        microbenchmarks=[], sweep={}, sweep_summary=summaries, overlap="overlap",
        implied_compute_scale=ImpliedComputeScale(spread={"overlap": Spread(2.0, 8.0, 4.0, [])}),
        calibration=Calibration("resnet-152/fred-c", 2.0, speedup, {f: {w: 0.0 for w in WORKLOADS}
                                                                   for f in PAPER_SPEEDUP}, []),
        calibration_paper=None, compute_sensitivity={}, platform={}, switch_timing={},
        compiler="x", elapsed_s=0.0)


def test_eval_console_tables_read_fields_of_the_result():
    from fred.commands import eval as command
    summary = _eval_summary()
    text = "\n".join(filter(None, [command._speedups(summary, "overlap"), command._why(summary),
                                   *command._sweeps(summary), command._spread(summary),
                                   command._calibration(summary)]))
    assert "resnet-152" in text and "1.50x" in text and "x2" in text
    assert to_json_dict(summary.implied_compute_scale) == {
        "spread": {"overlap": {"min": 2.0, "max": 8.0, "ratio": 4.0, "unreachable": []}}}


def test_a_renamed_result_field_fails_in_the_console_table(monkeypatch):
    """The tables read attributes: a result whose field is renamed fails when the table is
    built (here, in a test), instead of printing a wrong or missing figure."""
    from fred.commands import eval as command
    from studies import evaluation

    @dataclass(frozen=True)
    class Renamed:       # Explanation with one field renamed
        mesh_seconds: float
        compute_fraction_of_mesh_iteration: float
        exposed_comm_s: dict
        bubble_s: dict
        text: str
    summary = _eval_summary()
    renamed = dataclasses.replace(summary, explanation={
        w: Renamed(e.mesh_time_s, e.compute_fraction_of_mesh_iteration, e.exposed_comm_s, e.bubble_s, e.text)
        for w, e in summary.explanation.items()})
    with pytest.raises(AttributeError, match="mesh_time_s"):
        command._why(renamed)
    assert {f.name for f in dataclasses.fields(evaluation.Explanation)} >= {"mesh_time_s"}


def test_sweep_row_fields_are_the_strategy_rows_keys():
    """A sweep point is plain data (it crosses processes and caches); its keys are exactly
    SweepRow's fields, so a key renamed on one side fails when the rows are ranked."""
    from studies.evaluation import SweepRow, rank_rows, strategy_row
    from hdl.contracts.placement import parse_strategy
    from sysmodel.platform import default_platform
    from sysmodel.workload_file import get_workload
    row = strategy_row(default_platform(), "fred-d", get_workload("resnet-152"), parse_strategy("MP1-DP20-PP1"), 40)
    names = {f.name for f in dataclasses.fields(SweepRow)}
    assert set(row) <= names and names - set(row) == {"rank"}
    ranked = rank_rows([row, dict(row, strategy="X", time_per_sample_s=0.0)])
    assert [r.strategy for r in ranked] == ["X", "MP1-DP20-PP1"] and [r.rank for r in ranked] == [1, 2]
    with pytest.raises(TypeError, match="unexpected keyword argument 'time_per_sampel_s'"):
        rank_rows([{**{k: v for k, v in row.items() if k != "time_per_sample_s"}, "time_per_sampel_s": 1.0}])


def test_validation_result_json_has_the_fields_as_keys():
    from studies.validation import ValidationResult, ValidationRow
    row = ValidationRow("m/full", "m", "full", 8, "MP8-DP1-PP1", 1, 4, 1.0, 1.1, 0.1, {"compute": 1.0},
                        2.0, "full", [], 0.0)
    result = ValidationResult([row], 0.1, 0.1, "m/full", "p", None, 0.9, "s", {}, False)
    data = to_json_dict(result)
    assert data["cases"][0]["model_s"] == 1.1 and data["worst_case"] == "m/full"
    assert set(data) == {f.name for f in dataclasses.fields(ValidationResult)}


def test_fabric_validation_block_replaces_only_its_markers(tmp_path):
    """The fabric-validate block from stored rows (no Verilator): the table flags a case
    outside the tolerance and the text around the markers is kept."""
    from studies.fabric_validation import BEGIN, END, FabricValidationRow, summarise, write_fabric_validation
    rows = [FabricValidationRow("fred-a", "wafer all-reduce", 40, "hierarchical", 330.0, 165.0, 132.0, 7.0, 1,
                                "npu0->l1.0", 333, 333 / 330, 960, 1e5),
            FabricValidationRow("fred-d", "MP2-DP5-PP2 PP multicast", 4000, "in-switch", 4435.0, 2218.0,
                                1774.0, 7.0, 1, "l1.0->npu0", 4789, 4789 / 4435, 4000, 1e5)]
    result = summarise(rows, "fred fabric-validate --fabrics fred-a,fred-d")
    assert result.within_tolerance == 1 and result.worst is rows[1]
    doc = tmp_path / "v.md"
    doc.write_text(f"# kept\n\n{BEGIN}\nold\n{END}\n\nkept too\n")
    write_fabric_validation(result, doc, tmp_path / "v.png")
    text = doc.read_text()
    assert text.startswith("# kept\n\n" + BEGIN) and text.endswith(END + "\n\nkept too\n") and "old" not in text
    assert "| fred-a | wafer all-reduce | 40 | hierarchical | 330.0 (165 + 132 + 7) | 333 | 1.009 | 960 |" in text
    assert "| 4789 | 1.080 **!** | 4000 |" in text and "![RTL vs model cycles](v.png)" in text
    assert (tmp_path / "v.png").read_bytes()[:4] == b"\x89PNG"
    assert to_json_dict(result)["worst"]["rtl_cycles"] == 4789 and "output" not in to_json_dict(result)
