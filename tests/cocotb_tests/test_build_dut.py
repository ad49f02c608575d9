"""``cocotb_tests.runner.build_dut``: a failed Verilator build leaves nothing a retry would take
as built (a fresh clone's ``make test``, 2026-11-29: a hierarchical block's object compiled
empty, and every later attempt of that build failed at the link on it)."""

import pytest

from cocotb_tests import runner
from cocotb_tests.runner import _clear_failed_build, build_dut


def test_a_failed_builds_folder_keeps_only_its_log(tmp_path):
    """What a broken build leaves -- objects, a block's folder with an empty object, the
    makefiles -- is removed; the log stays to be read."""
    build = tmp_path / "fred_switch-0123"
    (build / "Vblock").mkdir(parents=True)
    (build / "Vblock" / "Vblock__ALL.o").write_bytes(b"")
    (build / "Vtop__ALL.a").write_bytes(b"x")
    (build / "Vtop.mk").write_text("all:\n")
    (build / "build.log").write_text("ld: undefined reference\n")
    _clear_failed_build(build)
    assert sorted(p.name for p in build.iterdir()) == ["build.log"]
    assert (build / "build.log").read_text() == "ld: undefined reference\n"


@pytest.mark.verilator
def test_a_build_that_fails_is_cleared_and_raises(tmp_path, monkeypatch):
    """Verilog Verilator refuses: the build raises, and its folder holds only the log (a retry
    starts from nothing); no ``build.ok`` stamp claims it built."""
    monkeypatch.setattr(runner, "SIM_BUILD", tmp_path)
    verilog = "module fred_broken_probe(input wire a);\n  this is not verilog;\nendmodule\n"
    with pytest.raises(Exception):
        build_dut(verilog, "fred_broken_probe")
    folders = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(folders) == 1
    assert sorted(p.name for p in folders[0].iterdir()) == ["build.log"]
