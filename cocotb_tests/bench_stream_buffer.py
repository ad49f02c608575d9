"""cocotb bench for :class:`hdl.designs.stream_buffer.StreamBuffer` (and the test-only FaultInjector).

Bench parameters (``bench_params()``): ``width``; ``items``; ``idle`` and ``backpressure``
probabilities; ``expect_fault`` (a scoreboard error kind the DUT is known to cause, for the
fault-injection runs; the test then passes only if exactly that kind is reported) and ``fault``
(the FaultInjector's fault to select).
"""

from __future__ import annotations

import cocotb

from cocotb_tests.lib import (StreamHarness, TaggedScoreboard, bench_params, metrics, never,
                              random_backpressure, random_idle, seeded_rng)
from hdl.contracts.bitfields import BitLayout

TAG_BITS = 16


@cocotb.test()
async def random_traffic(dut):
    """Tagged random items under random idle cycles and backpressure, checked by the scoreboard."""
    params = bench_params()
    width, items = params.get("width", 32), params.get("items", 2000)
    rng = seeded_rng("stream_buffer.random_traffic")
    harness = StreamHarness(dut, dut.clk, watchdog_cycles=1000)
    scoreboard = TaggedScoreboard("stream_buffer", ordered=True)
    item = BitLayout("tagged item", [("tag", TAG_BITS), ("filler", width - TAG_BITS)])
    tag_mask = item["tag"].mask
    driver = harness.driver("i", idle=random_idle(rng, params.get("idle", 0.3)))
    harness.sink("o", backpressure=random_backpressure(rng, params.get("backpressure", 0.3)),
                 on_transfer=lambda cycle, word: scoreboard.observe("o", item.get(word, "tag"), word))
    harness.outstanding = lambda: driver.pending + scoreboard.outstanding
    for tag in range(items):
        word = item.pack(tag=tag & tag_mask, filler=rng.getrandbits(width - TAG_BITS))
        scoreboard.expect("o", tag & tag_mask, word)
        driver.send(word)
    if "fault" in params:   # the test-only FaultInjector DUT
        from cocotb_tests.fault_injector import FAULTS
        dut.fault.value = FAULTS.index(params["fault"])
    await harness.start()
    await harness.wait_until(lambda: driver.pending == 0, what="all items sent")
    await harness.cycles(200)   # let late duplicates surface; far below the watchdog's 1000
    expected_fault = params.get("expect_fault")
    if expected_fault is None:
        scoreboard.check()
        assert scoreboard.matched == items
        return
    kinds = sorted({error.kind for error in scoreboard.all_errors()})
    dut._log.info("injected %s, scoreboard reports %s", expected_fault, kinds)
    assert kinds == [expected_fault], f"expected only {expected_fault!r}, scoreboard reported {kinds}"


@cocotb.test()
async def throughput_and_latency(dut):
    """No idle, no backpressure: measure flits/cycle after fill and the input-to-output latency."""
    params = bench_params()
    items = params.get("items", 2000)
    harness = StreamHarness(dut, dut.clk)
    driver = harness.driver("i", idle=never())
    sink = harness.sink("o", backpressure=never())
    driver.send_all(range(items))
    await harness.start()
    await harness.wait_until(lambda: sink.transfers == items, what="all items received")
    first_in, first_out = driver.transfer_cycles[0], sink.transfer_cycles[0]
    span = sink.transfer_cycles[-1] - first_out
    throughput = (items - 1) / span
    latency = first_out - first_in
    dut._log.info("throughput %.4f transfers/cycle, latency %d cycle(s)", throughput, latency)
    metrics.record(throughput=throughput, latency=latency, items=items,
                   transfers_ns={"i": [harness.time_ns(c) for c in driver.transfer_cycles],
                                 "o": [harness.time_ns(c) for c in sink.transfer_cycles]})
    assert throughput == 1.0, f"throughput {throughput} < 1 transfer/cycle"
