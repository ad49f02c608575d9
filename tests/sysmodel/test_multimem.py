"""The in-switch efficiency and NVLink SHARP's GPU-driven multimem protocol (docs/sysmodel.md,
"In-switch efficiency"): hand-computed bytes, times and the GPU-count curve they imply."""

from dataclasses import replace

import pytest

from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, evaluate
from sysmodel.multimem import multimem_bytes, multimem_time_s, multimem_traffic
from sysmodel.collectives import build_network
from sysmodel.platform import default_platform
from studies.collective_validation import shipped_platform

H100 = shipped_platform("dgx-h100")


def test_multimem_bytes_are_the_maintainers_accounting():
    # S = 8 bytes on 4 GPUs: reduce-scatter sends S, receives S/N; all-gather the reverse;
    # all-reduce both, S + S/N each way
    assert multimem_bytes("reduce-scatter", 8.0, 4) == (8.0, 2.0)
    assert multimem_bytes("all-gather", 8.0, 4) == (2.0, 8.0)
    assert multimem_bytes("all-reduce", 8.0, 4) == (10.0, 10.0)
    with pytest.raises(FredError, match="not 'broadcast'"):
        multimem_bytes("broadcast", 8.0, 4)
    with pytest.raises(FredError, match="at least 2 GPUs"):
        multimem_bytes("all-reduce", 8.0, 1)


def test_multimem_all_reduce_time_by_hand():
    p = H100.scaled(npus=4)
    size = 4 * 512 * 1000.0
    rate = 450e9 * 0.8222 * 0.836    # line rate x link efficiency x in-switch efficiency
    hop = 2000e-9                    # link.latency_ns
    round_trip = 2 * hop + p.switch.latency_s
    expected = (size + size / 4) / rate + 2 * round_trip
    # the scaled bytes are rounded up to whole 512-byte flits: at most one flit per link
    flit_s = 512 / (450e9 * 0.8222)
    got = multimem_time_s(p, "nvls", Collective("all-reduce", (0, 1, 2, 3), size))
    assert expected <= got <= expected + flit_s
    # all-gather: the downlink carries S, one round trip
    ag = (size / rate) + round_trip
    got = multimem_time_s(p, "nvls", Collective("all-gather", (0, 1, 2, 3), size))
    assert ag <= got <= ag + flit_s


def test_multimem_needs_one_switch():
    p = H100.scaled(npus=16)
    net = build_network(p, "nvls")
    with pytest.raises(FredError, match="under one L1 switch; group .* spans 2"):
        multimem_traffic(net, Collective("all-reduce", (0, 8), 1e6))


def test_nvls_gpu_count_curve_follows_from_one_efficiency():
    """busbw(N) = 2(N-1)/N x algbw, algbw = B x eta x N/(N+1): the curve's shape is the protocol's,
    only its level is the fitted efficiency; on 4 GPUs NVLS and the ring are level (eta x 1.2 ~ 1)."""
    size = 2.0 ** 33
    ring_rate = 450 * 0.8222
    for n in range(3, 9):
        t = multimem_time_s(H100.scaled(npus=n), "nvls", Collective("all-reduce", tuple(range(n)), size))
        busbw = size / t / 1e9 * 2 * (n - 1) / n
        assert busbw == pytest.approx(ring_rate * 0.836 * 2 * (n - 1) / (n + 1), rel=1e-3)
    assert 0.99 < 0.836 * 2 * 3 / 5 < 1.01


def test_in_switch_efficiency_scales_fred_in_switch_flows_only():
    p = default_platform()
    half = replace(p, variants={**p.variants, "fred-d": replace(p.variants["fred-d"], in_switch_efficiency=0.5)})
    assert p.variants["fred-d"].in_switch_efficiency == 1.0          # the default: the RTL's line rate
    ar = [Collective("all-reduce", tuple(range(20)), 1e9)]
    full_r, half_r = evaluate(p, "fred-d", ar), evaluate(half, "fred-d", ar)
    assert half_r.bandwidth_time_s == pytest.approx(2 * full_r.bandwidth_time_s, rel=1e-6)
    # endpoint traffic (a reduce-scatter runs the ring / hierarchical algorithm) is unchanged
    rs = [Collective("reduce-scatter", tuple(range(20)), 1e9)]
    assert evaluate(half, "fred-d", rs).time_s == evaluate(p, "fred-d", rs).time_s


def test_in_switch_efficiency_is_validated(tmp_path):
    from importlib import resources
    from sysmodel.platform import load_platform
    base = resources.files("sysmodel").joinpath("configs", "dgx-h100.toml").read_text()
    for bad, shown in (("1.2", "1.2"), ("0", "0")):
        path = tmp_path / "p.toml"
        path.write_text(base.replace("in_switch_efficiency = 0.836", f"in_switch_efficiency = {bad}"))
        with pytest.raises(FredError, match=rf"\[fred\.variants\.nvls\] in_switch_efficiency: .*got {shown}"):
            load_platform(path)
    with pytest.raises(FredError, match="in_switch_efficiency"):
        replace(H100, variants={**H100.variants, "nvls": replace(H100.variants["nvls"], in_switch_efficiency=2.0)})
