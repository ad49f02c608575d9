"""Long builds announce themselves (eda.toolchain.build_step): a line when a step starts, one when
it ends with its wall time, one naming the failure when it fails."""

from __future__ import annotations

import io
import re
import time

import pytest

from eda.toolchain import build_step


def test_a_step_prints_its_start_and_its_time():
    out = io.StringIO()
    with build_step("fred_fabric: compiling the C++ model", out):
        assert out.getvalue() == "build: fred_fabric: compiling the C++ model ...\n"   # before the work
        time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    seconds = float(re.fullmatch(r"build: fred_fabric: compiling the C\+\+ model done in (\d+\.\d) s", lines[1])[1])
    assert 0.0 <= seconds < 5


def test_a_failed_step_says_so_and_raises():
    out = io.StringIO()
    with pytest.raises(RuntimeError, match="make exit 2"):
        with build_step("x: verilating", out):
            raise RuntimeError("make exit 2")
    assert re.fullmatch(r"build: x: verilating \.\.\.\nbuild: x: verilating failed after \d+\.\d s\n", out.getvalue())
