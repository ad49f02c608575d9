"""``fred route --memh FILE``: the phases' configuration words as a ``$readmemh`` image, phase k
at words k*N..k*N+N-1, equal to the words ``--json`` prints."""

import json

from fred.cli import main


def test_memh_holds_every_phases_words_in_order(tmp_path, capsys):
    image = tmp_path / "config.memh"
    assert main(["route", "--ports", "8", "--collective", "reduce-scatter", "--group", "0,1,2,3",
                 "--memh", str(image), "--json"]) == 0
    phases = json.loads(capsys.readouterr().out)["phases"]
    lines = image.read_text().splitlines()
    words = [int(line, 16) for line in lines if line and not line.startswith("//")]
    assert len(phases) == 4 and words == [w for p in phases for w in p["words"]]
    assert all(len(line) == 8 for line in lines if not line.startswith("//"))   # 32-bit words
    assert sum(line.startswith("// phase ") for line in lines) == 4
