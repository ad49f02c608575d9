"""StreamBuffer under Verilator via cocotb, plus proof that the scoreboard catches injected faults."""

import pytest

from cocotb_tests.fault_injector import FaultInjector
from cocotb_tests.runner import run_bench
from hdl.emit.verilog import to_verilog

pytestmark = pytest.mark.cocotb

BENCH = "cocotb_tests.bench_stream_buffer"


def test_random_traffic_with_backpressure():
    run_bench(unit="stream_buffer", params={"width": 32}, test_module=BENCH,
              testcase="random_traffic",
              bench_params={"width": 32, "items": 5000, "idle": 0.3, "backpressure": 0.4})


def test_throughput_and_latency_measured():
    result = run_bench(unit="stream_buffer", params={"width": 32}, test_module=BENCH,
                       testcase="throughput_and_latency", bench_params={"items": 1000})
    from hdl.contracts.timing import BUFFER_LATENCY
    print(f"stream_buffer: {result.metrics}")
    assert result.metrics["throughput"] == 1.0
    assert result.metrics["latency"] == BUFFER_LATENCY


def test_vcd_timestamps_match_the_monitors():
    from cocotb_tests.lib.vcd import VcdStreams
    result = run_bench(unit="stream_buffer", params={"width": 32}, test_module=BENCH,
                       testcase="throughput_and_latency", bench_params={"items": 200}, waves=True)
    assert result.waves is not None
    waves = VcdStreams(result.waves)
    for stream in ("i", "o"):
        assert waves.transfers(stream) == result.metrics["transfers_ns"][stream]
    assert waves.payloads("o") == list(range(200))


EXPECTED_KIND = {"drop": "loss", "duplicate": "duplicate", "corrupt": "corruption"}


def _run_fault_injector(fault: str, **bench_params):
    dut = FaultInjector(width=32, at=37)
    return run_bench(verilog=(to_verilog(dut, name="fault_injector"), "fault_injector"),
                     test_module=BENCH, testcase="random_traffic", run_name=f"fault-{fault}",
                     bench_params={"width": 32, "items": 300, "fault": fault, **bench_params})


@pytest.mark.parametrize("fault", sorted(EXPECTED_KIND))
def test_scoreboard_detects_injected_fault(fault):
    _run_fault_injector(fault, expect_fault=EXPECTED_KIND[fault])


def test_fault_free_injector_passes_cleanly():
    # the same fixture with no fault gives a clean scoreboard, so the runs above can fail
    _run_fault_injector("none")


def test_undetected_fault_fails_the_bench():
    # a bench told to expect a clean run must fail when a fault is injected
    with pytest.raises(AssertionError, match="corruption"):
        _run_fault_injector("corrupt")
