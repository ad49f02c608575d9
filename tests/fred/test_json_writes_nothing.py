"""``--json`` prints; it writes files only when asked (``-o``): ``fred eval --json`` used to
overwrite ``results/``. The evaluation itself is replaced by a recorder of the folder it was
given (the mechanism under test is the option handling, not the model)."""

import json
from types import SimpleNamespace

import pytest

import studies.evaluation
from fred.cli import main


@pytest.fixture
def folders(monkeypatch):
    given = []

    def fake_run_evaluation(output, **kwargs):
        given.append(output)
        return SimpleNamespace(speedup={"fred-d": {}}, switch_timing={}, calibration_paper=None)
    monkeypatch.setattr(studies.evaluation, "run_evaluation", fake_run_evaluation)
    return given


def test_eval_json_writes_no_files_unless_asked(folders, tmp_path, capsys):
    assert main(["eval", "--json", "--no-diagnostic"]) == 0
    assert "speedup" in json.loads(capsys.readouterr().out)
    assert main(["eval", "--json", "--no-diagnostic", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert folders == [None, str(tmp_path)]
