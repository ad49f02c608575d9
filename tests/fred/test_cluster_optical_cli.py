"""`fred cluster --optical-study` (docs/optical.md)."""

from __future__ import annotations

import pytest

from fred.cli import main


def test_optical_study_prints_every_table(capsys):
    assert main(["cluster", "--optical-study"]) == 0
    out = capsys.readouterr().out
    for title in ("WRHT's formulas", "WRHT against ring and recursive doubling", "by x = S / (b d)",
                  "electrical against optical scale-out", "rack / spine split per workload"):
        assert title in out


def test_optical_study_refuses_a_platform(capsys):
    assert main(["cluster", "--optical-study", "--platform", "cluster-fred-wafers.toml"]) != 0
    assert "--optical-study computes its own platforms" in capsys.readouterr().err
