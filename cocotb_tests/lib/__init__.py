"""Verification library for Amaranth ``valid/ready/payload`` streams under cocotb 2.

Typical bench::

    harness = StreamHarness(dut, dut.clk, watchdog_cycles=1000)
    rng = seeded_rng("my_test")
    source = harness.driver("i", idle=random_idle(rng, 0.3))
    scoreboard = TaggedScoreboard()
    sink = harness.sink("o", backpressure=random_backpressure(rng, 0.3),
                        on_transfer=lambda item: scoreboard.observe("o", tag_of(item), item))
    harness.outstanding = lambda: scoreboard.outstanding
    await harness.start()           # clock, reset, then one loop services every agent each cycle
    ...
    await harness.wait_until(lambda: scoreboard.outstanding == 0)
    scoreboard.check()

Every agent is serviced by one coroutine per cycle (:class:`StreamHarness`), which keeps
Python overhead per cycle low and makes the transfer rule explicit in one place: a transfer
happens at a rising edge when ``valid`` and ``ready`` were both high in the settled
(``ReadOnly``) values before it.
"""

from .generators import always, never, random_backpressure, random_idle, bursts
from . import metrics
from .scoreboard import ScoreboardError, TaggedScoreboard
from .seeds import base_seed, bench_params, get_seed, seeded_rng
from .stream import StreamDriver, StreamHarness, StreamMonitor, StreamSink
from .watchdog import Watchdog, WatchdogTimeout

__all__ = [
    "always", "never", "random_backpressure", "random_idle", "bursts",
    "ScoreboardError", "TaggedScoreboard", "base_seed", "bench_params", "get_seed",
    "seeded_rng", "StreamDriver", "StreamHarness", "StreamMonitor", "StreamSink",
    "Watchdog", "WatchdogTimeout", "metrics",
]
