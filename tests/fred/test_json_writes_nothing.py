"""``--json`` prints; it writes files only when asked (``-o``): ``fred eval --json`` in an empty
folder leaves it empty (it used to overwrite ``results/``)."""

import json

from fred.cli import main


def test_eval_json_writes_no_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--json", "--no-diagnostic"]) == 0
    assert "speedup" in json.loads(capsys.readouterr().out)
    assert list(tmp_path.iterdir()) == []
