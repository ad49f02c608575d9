"""A non-editable install runs on the measured switch timing it ships with.

The project is installed the way a user installs it (``pip install <copy of the tree>``, build
isolation and all, no ``-e``) into a fresh virtual environment whose only other path is the
development environment's site-packages (for numpy, matplotlib, amaranth...: added by a
``.pth`` line, so that environment's editable-install hook is not run). The installed ``fred``
console script then runs ``fred eval --json`` from a folder outside the source tree: every
project package must come from the install, and the switch timing must be the measured one,
read from the characterization shipped inside the installed package. The install also lints
generated Verilog with the waivers it ships (``eda/lint_waivers.vlt``), runs ``fred fabric-sim
--model-only``, and lists the lock-step simulator's C++ driver (``eda/fabric/lockstep.cpp``)
among its files.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fred", "hdl", "eda", "cocotb_tests", "sysmodel", "studies")
#: What the build needs from the tree; the rest (tests, docs, caches, build output) is left out.
NOT_BUILT = (".git", ".venv", "build", "sim_build", "results", "__pycache__", "*.egg-info",
             ".pytest_cache", ".hypothesis", "tests", "docs")
#: Non-Python files the tools read at run time, which must ship as package data.
PACKAGE_DATA = ("eda/lint_waivers.vlt", "eda/fabric/lockstep.cpp", "sysmodel/data/characterization.json")


def _run(argv, cwd, env, what):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode:
        pytest.fail(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, fred script, site-packages, environment) of a fresh non-editable install."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"   # pip builds in the tree it is given: keep the worktree clean
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_BUILT))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], tmp, env, "python -m venv")
    python = tmp / "venv" / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp, env, "locating site-packages").stdout.strip())
    dev = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "development-environment.pth").write_text("".join(f"{p}\n" for p in sorted(dev)))
    _run([str(python), "-m", "pip", "install", "--no-deps", "--quiet", str(source)], tmp, env,
         "pip install (non-editable)")
    return python, tmp / "venv" / "bin" / "fred", site, env


def test_the_install_imports_its_own_copy(installed, tmp_path):
    python, _, site, env = installed
    code = "import json, importlib; print(json.dumps({p: importlib.import_module(p).__file__ for p in %r}))"
    files = json.loads(_run([str(python), "-c", code % (PACKAGES,)], tmp_path, env, "import").stdout)
    for package, file in files.items():
        assert Path(file).is_relative_to(site), f"{package} imported from {file}, not the install"
    shipped = site / "sysmodel" / "data" / "characterization.json"
    assert shipped.is_file() and not shipped.is_symlink()
    assert shipped.read_bytes() == (ROOT / "data" / "characterization.json").read_bytes()


def test_fred_eval_json_reports_the_measured_switch_timing(installed, tmp_path):
    """``fred eval --json`` from outside the tree: the speedup table, and the switch timing
    measured by ``fred characterize``, read from the characterization shipped with the
    install (not assumed)."""
    _, fred, site, env = installed
    proc = _run([str(fred), "eval", "--json", "--no-diagnostic", "--uncertainty-samples", "1",
                 "-o", str(tmp_path / "results")],
                tmp_path, env, "fred eval --json")
    data = json.loads(proc.stdout)
    assert set(data) == {"speedup", "switch_timing"}
    assert set(data["speedup"]) == {"fred-a", "fred-b", "fred-c", "fred-d"}
    assert set(data["speedup"]["fred-d"]) == {"resnet-152", "transformer-17b", "gpt-3", "transformer-1t"}
    timing = data["switch_timing"]
    measured = json.loads((ROOT / "data" / "characterization.json").read_text())
    for level, point in (("l1", "P12m3fp16"), ("l2", "P10m3fp16")):   # paper.toml's chiplets
        assert timing[level]["shipped"] is True
        assert Path(timing[level]["source"]) == (site / "sysmodel" / "data" / "characterization.json").resolve()
        for name, value in measured["switches"][point]["switch"].items():
            assert timing[level][name] == value, (level, name)
        assert timing[level]["generated_by"].startswith(measured["generated_by"]["command"])
    for name in ("report.md", "speedup.csv", "iterations.csv", "results.json", "microbenchmarks.csv",
                 "speedup.png", "breakdown.png", "sweep.png",
                 "sweep_transformer-17b_fred-d.csv", "sweep_transformer-1t_mesh.csv"):
        assert (tmp_path / "results" / name).stat().st_size > 0, name
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["switch_timing"] == timing
    assert "[3/4]" not in proc.stderr  # quiet with --json (docs/sysmodel.md, Speed: no progress, no step log)


def test_a_missing_characterization_stops_the_install(installed, tmp_path):
    """Without its characterization the install refuses to run, naming the missing file."""
    _, fred, site, env = installed
    shipped = site / "sysmodel" / "data" / "characterization.json"
    hidden = shipped.with_suffix(".hidden")
    shipped.rename(hidden)
    try:
        proc = subprocess.run([str(fred), "collective", "--fabric", "fred-d", "--op", "all-reduce",
                               "--size", "1e6", "--group", "wafer"], cwd=tmp_path, env=env,
                              capture_output=True, text=True)
    finally:
        hidden.rename(shipped)
    assert proc.returncode == 1
    assert "shipped with the package is missing" in proc.stderr and str(shipped) in proc.stderr


def test_the_install_ships_the_tools_data_files(installed):
    """The wheel's file list (the install's RECORD) holds the lint waivers and the lock-step
    C++ driver, and the installed copies are the tree's."""
    _, _, site, _ = installed
    record = next(site.glob("fred_wafer-*.dist-info")) / "RECORD"
    listed = {line.split(",")[0] for line in record.read_text().splitlines()}
    for name in PACKAGE_DATA:
        assert name in listed, f"{name} is not in the wheel"
        assert (site / name).read_bytes() == (ROOT / name).resolve().read_bytes(), name


def test_fred_lint_uses_the_installed_waivers(installed, tmp_path):
    """``fred verilog`` then ``fred lint`` from outside the tree: Verilator reads the waivers
    file of the install (a missing file would fail the run), and the adder lints clean."""
    python, fred, site, env = installed
    verilog = tmp_path / "fred_adder.v"
    _run([str(fred), "verilog", "--unit", "adder", "-o", str(verilog)], tmp_path, env, "fred verilog")
    proc = _run([str(fred), "lint", str(verilog), "--json"], tmp_path, env, "fred lint")
    [report] = json.loads(proc.stdout)
    assert (report["file"], report["clean"], report["modules"]) == (str(verilog), True, 1)
    waivers = _run([str(python), "-c", "from eda.lint import WAIVERS; print(WAIVERS)"], tmp_path,
                   env, "locating the waivers").stdout.strip()
    assert Path(waivers) == site / "eda" / "lint_waivers.vlt"


def test_fred_fabric_sim_model_only_runs_from_the_install(installed, tmp_path):
    """The model's side of a fabric case (no Verilator build: the RTL side of the same command
    is what the shipped lockstep.cpp drives, listed above)."""
    _, fred, _, env = installed
    proc = _run([str(fred), "fabric-sim", "--model-only", "--fabric", "fred-b", "--op", "all-reduce",
                 "--group", "wafer", "--size", "40", "--json"], tmp_path, env, "fred fabric-sim")
    installed_case = json.loads(proc.stdout)
    assert "rtl" not in installed_case and installed_case["model"]["cycles"] > 0
    from studies.fabric_case import build_case   # the same case computed by the tree
    tree = build_case(fabric="fred-b", op="all-reduce", size=40, group="wafer", strategy=None,
                      dim=None, characterization=None, algorithm=None)
    assert installed_case["model"] == json.loads(json.dumps(tree.to_dict()["model"]))
