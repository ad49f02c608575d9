"""The Megatron-style GPT run across wafers (studies/megatron_study.py, docs/cluster.md)."""

import math

import pytest

from fred.cli import main
from hdl.contracts.errors import FredError
from studies.megatron_study import (GLOBAL_BATCH, MEGATRON_WORKLOAD, megatron_clusters, megatron_mapping,
                                    megatron_table)
from sysmodel.workload_file import get_workload


def test_workload_is_gpt3_175b_as_megatron_runs_it():
    wl = get_workload(MEGATRON_WORKLOAD)
    assert 170e9 < wl.params < 180e9          # GPT-3 175B (Brown et al.), vocabulary 51200
    assert str(wl.strategy) == "MP20-DP1-PP1"  # tensor parallelism over the whole wafer
    assert wl.microbatches == wl.samples_per_dp  # micro-batch size 1


@pytest.mark.parametrize("npus, outer", [(1000, ("rack", "spine")), (10000, ("rack", "pod", "spine"))])
def test_clusters_and_mapping(npus, outer):
    for cluster in megatron_clusters(npus).values():
        assert cluster.npus == npus == math.prod(d.size for d in cluster.dimensions)
        assert tuple(d.name for d in cluster.dimensions[1:]) == outer
        assert megatron_mapping(cluster) == {d: ("pp" if d == "rack" else "dp") for d in outer}
    fred, mesh = megatron_clusters(npus)["fred"], megatron_clusters(npus)["mesh"]
    assert fred.dimensions[0].kind == "fred" and mesh.dimensions[0].kind == "mesh"


def test_unknown_size_is_an_error():
    with pytest.raises(FredError, match="1000 and 10000"):
        megatron_clusters(2000)


def _check_rows(rows):
    for r in rows:
        for result in (r.fred, r.mesh):
            assert result.pp_across == 10 and result.npus_used == r.npus
            # global batch about GPT-3's, one microbatch per sample, run by every pipeline wafer
            assert GLOBAL_BATCH <= r.samples_per_dp * result.dp_global < GLOBAL_BATCH + result.dp_global
            assert result.wafer.microbatches == r.samples_per_dp
            assert result.time_s == pytest.approx(result.pipeline_s + result.cross_wafer.time_s)
        # both clusters reduce the same bytes over the same scale-out: only the wafers differ
        assert r.fred.gradient_bytes_per_npu == r.mesh.gradient_bytes_per_npu
        assert r.fred.cross_wafer.time_s == pytest.approx(r.mesh.cross_wafer.time_s)
    return {(r.npus, r.schedule): r for r in rows}


def test_table_mechanisms_at_10000_npus():
    rows = _check_rows(megatron_table((10000,)))
    # two DP dimensions (pod, spine): Themis balances them and is faster than the fixed order
    fixed, themis = rows[10000, "fixed"].fred.cross_wafer, rows[10000, "themis"].fred.cross_wafer
    assert themis.time_s < fixed.time_s
    busy = [d.busy_s for d in themis.dimensions]
    assert max(busy) / min(busy) < 1.2


@pytest.mark.full
def test_table_at_1000_npus_and_the_cli(capsys):
    rows = _check_rows(megatron_table((1000,)))
    # one DP dimension: the chunk order has no choice
    assert rows[1000, "fixed"].fred.time_s == rows[1000, "themis"].fred.time_s
    assert main(["cluster", "--megatron-study"]) == 0
    out = capsys.readouterr().out
    assert MEGATRON_WORKLOAD in out and out.count("| 10000 |") == 2 and out.count("| 1000 |") == 2


def test_cli_refuses_two_studies_or_a_platform(capsys):
    assert main(["cluster", "--megatron-study", "--study"]) != 0
    assert "one study at a time" in capsys.readouterr().err
    assert main(["cluster", "--megatron-study", "--platform", "cluster-fred-wafers.toml"]) != 0
    assert "--megatron-study computes its own platforms" in capsys.readouterr().err
