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
