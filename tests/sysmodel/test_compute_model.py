"""Compute that depends on shape (docs/sysmodel.md, Fidelity): hand-computed GEMM efficiencies and element-wise work."""

import math

import pytest

from hdl.contracts.errors import FredError
from sysmodel.compute import ComputeModel, Gemm, VectorOp
from sysmodel.platform import default_platform, parse_platform
from sysmodel.training import simulate_iteration
from sysmodel.workloads import transformer


def model(**kw):
    args = dict(peak_tflops=100.0, memory_gbps=1000.0, sms=4, tiles=((128, 128, 1.0),),
                gemm_peak_fraction=0.8, k_overhead=64, vector_efficiency=0.5)
    args.update(kw)
    return ComputeModel(**args)


def test_tile_and_wave_quantisation():
    cm = model()
    assert cm.tile_utilisation(256, 256) == pytest.approx(1.0)          # 4 tiles, 4 SMs, 1 wave
    assert cm.tile_utilisation(128, 128) == pytest.approx(1 / 4)        # 1 tile on 4 SMs
    assert cm.tile_utilisation(256, 320) == pytest.approx((256 * 320) / (6 * 128 * 128) * 6 / 8)
    assert cm.tile_utilisation(64, 64, batch=8) == pytest.approx(0.25)  # quarter-full tiles, 2 waves full
    two = model(tiles=((128, 128, 1.0), (64, 64, 0.5)))
    assert two.tile_utilisation(128, 128) == pytest.approx(0.5)         # 4 small tiles x 0.5 beat 1 big


def test_short_reductions_and_the_memory_floor():
    cm = model()
    full = cm.gemm_efficiency(256, 256, 1e9)
    assert full == pytest.approx(0.8, rel=1e-6)
    assert cm.gemm_efficiency(256, 256, 64) == pytest.approx(0.4)        # k = k_overhead: half
    t = cm.gemm_time(256, 256, 6400)
    assert t == pytest.approx(2 * 256 * 256 * 6400 / (100e12 * 0.8 * 6400 / 6464))
    # a thin GEMM is memory-bound: bytes of A, B, C over HBM
    m, n, k = 1, 1, 1_000_000
    assert cm.gemm_time(m, n, k) == pytest.approx(max(2 * k / (100e12 * cm.gemm_efficiency(m, n, k)),
                                                      2 * (k + k + 1) / 1e12))


def test_data_types_change_peak_and_bytes():
    cm = model()
    assert cm.gemm_time(256, 256, 1e6, dtype="fp8") == pytest.approx(cm.gemm_time(256, 256, 1e6) / 2)
    assert cm.gemm_time(256, 256, 1e6, dtype="fp32") == pytest.approx(cm.gemm_time(256, 256, 1e6) * 2)
    with pytest.raises(FredError, match="no speed for data type 'int4'"):
        cm.peak_flops("int4")


def test_backward_is_data_and_weight_gradient_by_their_own_shapes():
    cm = model()
    g = Gemm(m=512, n=256, k=128)
    fwd = cm.layer_time([g], [], samples=1, mp=1, dtype="fp16", backward=False)
    bwd = cm.layer_time([g], [], samples=1, mp=1, dtype="fp16", backward=True)
    assert fwd == pytest.approx(cm.gemm_time(512, 256, 128))
    assert bwd == pytest.approx(cm.gemm_time(512, 128, 256) + cm.gemm_time(128, 256, 512))


def test_model_parallel_sharding_and_batched_products():
    g = Gemm(m=10, n=40, k=20, shard="n")
    assert g.shape(samples=3, mp=4) == (30, 10, 20, 1)
    assert Gemm(m=10, n=40, k=20, shard="k").shape(2, 4) == (20, 40, 5, 1)
    heads = Gemm(m=16, n=16, k=8, count=8, shard="count", merge=False)
    assert heads.shape(samples=3, mp=4) == (16, 16, 8, 6)
    with pytest.raises(FredError, match="shard"):
        Gemm(1, 1, 1, shard="m")


def test_element_wise_work_is_bandwidth_bound_and_split_by_sequence_parallelism():
    cm = model()
    ops = [VectorOp(1000.0, "sp"), VectorOp(800.0, "mp"), VectorOp(200.0)]
    t = cm.layer_time([], ops, samples=2, mp=4, dtype="fp16", backward=False)
    assert t == pytest.approx((2000 + 400 + 400) / (1e12 * 0.5))
    t_sp = cm.layer_time([], ops, samples=2, mp=4, dtype="fp16", backward=False, sequence_parallel=True)
    assert t_sp == pytest.approx((500 + 400 + 400) / (1e12 * 0.5))
    assert cm.layer_time([], ops, samples=2, mp=4, dtype="fp16", backward=True) == pytest.approx(2 * t)


def test_platform_compute_section_is_validated_and_follows_the_peak():
    p = default_platform()
    assert p.compute is not None and p.compute.peak_tflops == p.peak_tflops
    fast = p.with_compute_scale(4)
    assert fast.compute.peak_tflops == 4 * p.peak_tflops
    assert fast.compute.memory_gbps == 4 * p.memory_bandwidth_gbps
    import tomllib
    from importlib import resources
    doc = tomllib.loads(resources.files("sysmodel").joinpath("configs", "paper.toml").read_text())
    doc["compute"]["colour"] = 1
    with pytest.raises(FredError, match=r"\[compute\] colour: unknown key"):
        parse_platform(doc, switch=p.switch)
    del doc["compute"]["colour"]
    doc["compute"]["tiles"] = [[128, 128, 1.5]]     # a tile's relative efficiency above 1
    with pytest.raises(FredError, match=r"\[compute\] tiles\[0\]\[2\]: expected a number in \(0, 1\], got 1.5"):
        parse_platform(doc, switch=p.switch)


def test_without_a_compute_section_the_flat_roofline_is_kept():
    p = default_platform().scaled(compute=None)
    w = transformer(name="t", layers=2, hidden=1024, heads=8, seq=512, vocab=1000,
                    mode="weight-stationary", strategy="MP1-DP20-PP1", microbatches=1, samples_per_dp=2,
                    recompute="none")
    r = simulate_iteration(p, "fred-d", w)
    flops = 3 * w.fwd_flops_per_sample * 2     # forward + 2x backward, 2 samples
    assert r.breakdown["compute"] >= flops / (p.peak_flops * p.compute_efficiency) * (1 - 1e-9)


def test_bigger_model_parallel_degree_means_less_efficient_gemms():
    """The mechanism behind "the most compute-efficient strategy": splitting a layer over more
    MP ranks makes each rank's GEMMs narrower, so their efficiency falls."""
    p = default_platform()
    w = transformer(name="t", layers=1, hidden=4256, heads=28, seq=1024, vocab=1000,
                    mode="weight-stationary", strategy="MP1-DP1-PP1", microbatches=1)
    block = w.layers[1]
    eff = []
    for mp in (1, 2, 5, 10, 20):
        t = p.compute.layer_time(block.gemms, [], samples=2, mp=mp, dtype="fp16", backward=False)
        eff.append(block.fwd_flops * 2 / mp / t / p.peak_flops)
    assert all(a >= b for a, b in zip(eff, eff[1:])) and eff[0] > 1.2 * eff[-1]
    assert not any(math.isnan(e) for e in eff)


@pytest.mark.parametrize("key, value, message", [
    ("sms", True, r"\[compute\] sms: expected an integer >= 1, got true"),
    ("tiles", [], r"\[compute\] tiles: expected at least 1 entry, got 0"),
    ("tiles", [[128.0, 128, 0.5]], r"\[compute\] tiles\[0\]\[0\]: expected an integer >= 1, got 128.0"),
    ("tiles", [[128, 128]], r"\[compute\] tiles\[0\]\[2\]: missing"),
    ("k_overhead", -1, r"\[compute\] k_overhead: expected a number >= 0, got -1"),
    ("vector_efficiency", 0, r"\[compute\] vector_efficiency: expected a number in \(0, 1\], got 0"),
    ("dtype_speed", {"fp64": 1.0}, r"\[compute.dtype_speed\] fp64: expected one of"),
])
def test_compute_table_errors_name_the_file_the_table_and_the_key(key, value, message):
    """The ``[compute]`` table is validated by its schema (no hand-written type checks): a bool
    is no number, an int field takes no float, every error names the table and the key."""
    import tomllib
    from importlib import resources
    p = default_platform()
    doc = tomllib.loads(resources.files("sysmodel").joinpath("configs", "paper.toml").read_text())
    doc["compute"][key] = value
    with pytest.raises(FredError, match=message):
        parse_platform(doc, switch=p.switch, source="x.toml")
