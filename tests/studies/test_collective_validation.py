"""``fred validate --collectives``: the measured NCCL cases, their sources, the fitted points and
the model's errors (docs/sysmodel.md, "In-switch efficiency")."""

import json

import pytest

from fred.cli import main
from hdl.contracts.errors import FredError
from studies.collective_validation import (bus_factor, load_collective_cases, model_time_s,
                                           run_collective_validation, shipped_platform)


def test_every_case_cites_its_thread_and_few_points_are_fitted():
    cases, statements, header = load_collective_cases()
    assert header["retrieved"] and "NVIDIA/nccl" in header["source"]
    assert all(c.thread.startswith("https://github.com/NVIDIA/nccl") for c in cases)
    fitted = [c.name for c in cases if c.fits]
    assert fitted == ["a100-ring-allreduce-8", "h100-ring-allreduce-8", "h100-nvls-allreduce-8"]
    # the GPU-count curve and the all-gather points are predictions
    assert {c.gpus for c in cases if c.algorithm == "nvls" and not c.fits} >= {3, 4, 5, 6, 7, 8}
    assert statements and statements[0].collectives == ("all-gather", "reduce-scatter")


def test_bus_bandwidth_is_nccl_tests_definition():
    assert bus_factor("all-reduce", 8) == 1.75 and bus_factor("all-gather", 8) == 0.875
    cases, _, _ = load_collective_cases()
    nvls8 = next(c for c in cases if c.name == "h100-nvls-allreduce-8")
    assert nvls8.measured_algbw_gbps == 275.0      # given as algbw (busbw 481)
    shh = next(c for c in cases if c.name == "h100-nvls-allreduce-5")
    assert shh.measured_algbw_gbps == pytest.approx(420 / 1.6)


def test_a_case_needs_exactly_one_bandwidth(tmp_path):
    text = '''source = "s"
retrieved = "2026-11-25"
[[case]]
name = "x"
platform = "dgx-h100"
collective = "all-reduce"
algorithm = "ring"
gpus = 8
size_bytes = 1024
thread = "https://github.com/NVIDIA/nccl/issues/1"
who = "w"
'''
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(FredError, match="exactly one of busbw_gbps and algbw_gbps"):
        load_collective_cases(path)
    path.write_text(text.replace('algorithm = "ring"', 'algorithm = "tree"') + "busbw_gbps = 1.0\n")
    with pytest.raises(FredError, match=r"algorithm: expected one of 'ring', 'nvls', got 'tree'"):
        load_collective_cases(path)
    with pytest.raises(FredError, match="no shipped platform configs/nope.toml"):
        shipped_platform("nope")


def test_ring_time_by_hand():
    # ring all-reduce, 8 GPUs through one switch: 2(N-1)/N x S per direction at 370 GB/s
    p = shipped_platform("dgx-h100")
    size = 2.0 ** 33
    t = model_time_s(p, "all-reduce", "ring", 8, size)
    assert t == pytest.approx(2 * 7 / 8 * size / (450e9 * 0.8222), rel=1e-3)


def test_validation_errors_and_what_they_show():
    r = run_collective_validation()
    by = {row.case: row for row in r.cases}
    for name in r.fitted:
        assert abs(by[name].error) < 0.005
    # NVLS's 1.3x over the ring on 8 GPUs, from the protocol and one efficiency
    assert by["h100-nvls-allreduce-8"].model_busbw_gbps / by["h100-ring-allreduce-8"].model_busbw_gbps \
        == pytest.approx(1.3, abs=0.01)
    for n in (4, 5, 6, 7, 8):
        key = "h100-nvls-allreduce-8-shh2000" if n == 8 else f"h100-nvls-allreduce-{n}"
        assert abs(by[key].error) < 0.05
    # the miss the model does not explain: on 3 GPUs NVLS measures at the ring's bus bandwidth,
    # the protocol's bytes at the fitted efficiency give 309 GB/s
    assert by["h100-nvls-allreduce-3"].error > 0.15
    assert all(s.holds for s in r.statements)
    assert r.mean_abs_error < 0.05 and r.worst_case == "h100-nvls-allreduce-3" and not r.meets_target


def test_cli_prints_and_writes_json(capsys):
    assert main(["validate", "--collectives"]) == 0
    out = capsys.readouterr().out
    assert "fitted points: a100-ring-allreduce-8, h100-ring-allreduce-8, h100-nvls-allreduce-8" in out
    assert "in_switch_efficiency 0.836" in out and "holds in the model" in out
    assert main(["validate", "--collectives", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["cases"]) == 16 and doc["target"] == {"mean_abs_error": 0.05, "worst_abs_error": 0.10}
    assert main(["validate", "--collectives", "--only", "x"]) == 1
