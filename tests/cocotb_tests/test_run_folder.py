"""``cocotb_tests.runner.run_folder``: where a bench run's files go (pure, no simulator)."""

from pathlib import Path

from cocotb_tests.runner import run_folder


def test_a_run_name_with_spaces_and_slashes_names_one_folder_under_runs(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    # a request label (spaces, a colon) and a path separator: each run of them is one "_"
    assert run_folder(Path("b"), "packet-fred-d-MP2-DP5-PP2 dp: x/y-40") == \
        Path("b") / "runs" / "packet-fred-d-MP2-DP5-PP2_dp_x_y-40"
    assert run_folder(Path("b"), "iteration-fred-a-n20-d3.p1") == Path("b") / "runs" / "iteration-fred-a-n20-d3.p1"


def test_each_xdist_worker_gets_its_own_folder(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert run_folder(Path("b"), "mesh io") == Path("b") / "runs" / "mesh_io-gw1"
