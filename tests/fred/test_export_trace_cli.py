"""``fred export-trace`` then ``fred replay`` on its files (docs/chakra_export.md): the replay
gives the exported model time; the scale's range is checked before any work."""

import json
import subprocess
import sys

import pytest


def test_cli_export_then_replay(tmp_path):
    run = [sys.executable, "-m", "fred"]
    proc = subprocess.run([*run, "export-trace", "--workload", "transformer-17b", "--samples-per-dp", "8",
                           "--scale", "10", "--fabric", "fred-d", "-o", str(tmp_path), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    exported = json.loads(proc.stdout)
    assert len(exported["files"]) == 18 and exported["scale"] == 10
    proc = subprocess.run([*run, "replay", exported["files"][5], "--fabric", "fred-d", "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    replayed = json.loads(proc.stdout)["results"]["fred-d"]
    assert replayed["time_s"] == pytest.approx(exported["model"]["fred-d"]["time_s"], rel=1e-9)
    proc = subprocess.run([*run, "export-trace", "--workload", "gpt-3", "--scale", "0.5", "-o",
                           str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "--scale: expected a finite number in [1, 1e+09]" in proc.stderr


def test_replay_of_an_incomplete_or_overridden_rank_set_is_refused(tmp_path):
    run = [sys.executable, "-m", "fred"]
    proc = subprocess.run([*run, "export-trace", "--workload", "resnet-152", "--strategy", "MP1-DP10-PP2",
                           "--samples-per-dp", "2", "--scale", "100", "-o", str(tmp_path), "--prefix", "r"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "wrote 20 files" in proc.stdout and "fred replay" in proc.stdout
    proc = subprocess.run([*run, "replay", str(tmp_path / "r.0.et"), "--npus", "20"], capture_output=True, text=True)
    assert proc.returncode == 1 and "--npus: a trace set whose collectives name their groups" in proc.stderr
    (tmp_path / "r.7.et").unlink()
    proc = subprocess.run([*run, "replay", str(tmp_path / "r.0.et")], capture_output=True, text=True)
    assert proc.returncode == 1 and "must be 0..n-1; missing 7" in proc.stderr
