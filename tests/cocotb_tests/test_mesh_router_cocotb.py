"""The mesh router's Verilog (``fred_mesh_router``) under Verilator via cocotb
(cocotb_tests/bench_mesh_router.py): latency, the uncontended per-port rate, uniform /
transpose / hotspot random traffic under idle and backpressure (tagged ordered scoreboard,
watchdog, credit checks every cycle), and saturation throughput per pattern."""

import pytest

from cocotb_tests.bench_mesh_router import DESIGN, FLIT
from cocotb_tests.runner import run_bench
from hdl.contracts.mesh import router_latency

pytestmark = pytest.mark.cocotb

BENCH = "cocotb_tests.bench_mesh_router"
TESTS = ["latency", "permutation", "random_patterns", "saturation"]


def _check(m, *, permutation_packets):
    print(f"fred_mesh_router: {m}")
    assert m["latency_cycles"] == router_latency()
    # uncontended: one flit per cycle per port, less the pipeline's fill and drain
    flits = permutation_packets * FLIT.packet_flits
    assert m["permutation_flits_per_port"] == flits
    assert m["permutation_cycles"] <= flits + router_latency() + 4
    assert m["permutation_rate"] == 1.0
    for pattern in ("uniform", "transpose", "hotspot"):
        assert m[f"random_{pattern}_flits"] > 0
        # an output carries at most one flit per cycle; the average is below the busiest
        assert 0 < m[f"saturation_{pattern}_per_port"] <= m[f"saturation_{pattern}_busiest_output"] <= 1.0
    # hotspot: over half the packets head for one output, the bottleneck; the allocator gives
    # it a flit whenever any input's head wants it, so it stays busy (head-of-line blocking
    # lets the uniform pattern's outputs idle at times: that is why only hotspot is pinned)
    assert m["saturation_hotspot_busiest_output"] >= 0.9


def test_mesh_router_short():
    params = {"permutation_packets": 25, "random_packets": 30, "saturation_packets": 60}
    result = run_bench(unit="mesh_router", params=DESIGN, test_module=BENCH, testcase=TESTS,
                       bench_params=params)
    _check(result.metrics, permutation_packets=25)


@pytest.mark.full
def test_mesh_router_long():
    params = {"permutation_packets": 400, "random_packets": 1000, "saturation_packets": 2000,
              "idle": 0.5, "backpressure": 0.5}
    result = run_bench(unit="mesh_router", params=DESIGN, test_module=BENCH, testcase=TESTS,
                       bench_params=params, run_name="bench_mesh_router-long")
    _check(result.metrics, permutation_packets=400)
