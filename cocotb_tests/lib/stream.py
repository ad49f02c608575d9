"""Stream agents for Amaranth ``valid/ready/payload`` ports, serviced by one harness loop.

Port names follow Amaranth's flattening: a stream member ``i`` gives ``i__valid``, ``i__ready``
and ``i__payload``; a member ``i`` that is an array gives ``i__0__valid`` and so on. Agents take
the prefix (``"i"``, ``"i__0"``).

Transfer rule, written once (:meth:`StreamHarness._loop`): every cycle the harness waits for the
rising edge, lets every agent commit the transfer it sampled before that edge and drive its
outputs for the new cycle, then waits for ``ReadOnly`` (all combinational logic settled) and lets
every agent sample ``valid & ready``. A transfer sampled there happens at the next rising edge.
Drivers follow the stream rules: ``valid`` never waits for ``ready``, and once raised it stays
high with the same payload until the transfer.
"""

from __future__ import annotations

import collections
from typing import Callable, Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from .generators import never
from .watchdog import Watchdog

__all__ = ["StreamHarness", "StreamDriver", "StreamSink", "StreamMonitor"]


def _read(handle) -> int:
    value = handle.value
    try:
        return int(value)
    except ValueError:
        raise AssertionError(f"{handle._name} is not a resolved 0/1 value: {value}") from None


class _Agent:
    def __init__(self, harness, dut, prefix: str, name: str | None):
        self.harness = harness
        self.prefix = prefix
        self.name = name or prefix
        try:
            self.valid = getattr(dut, f"{prefix}__valid")
            self.ready = getattr(dut, f"{prefix}__ready")
            self.payload = getattr(dut, f"{prefix}__payload", None)
        except AttributeError as exc:
            raise AttributeError(f"DUT has no stream {prefix!r}: {exc}") from None
        self.transfers = 0
        self.transfer_cycles: list[int] = []   #: cycle (harness count) of every transfer
        self.record_cycles = True

    def _record(self, cycle: int) -> None:
        self.transfers += 1
        if self.record_cycles:
            self.transfer_cycles.append(cycle)
        self.harness.watchdog.kick()

    # overridden
    def _edge(self, cycle: int) -> None: ...
    def _sample(self, cycle: int) -> None: ...
    def _reset(self) -> None: ...


class StreamDriver(_Agent):
    """Drives a stream into the DUT from a queue.

    Parameters:
        idle: iterator of booleans; ``True`` inserts an idle cycle before offering the next item
            (never while an item is being held).
        on_transfer: ``callback(cycle, payload)`` after each transfer.
    """

    def __init__(self, harness, dut, prefix, *, idle: Iterator[bool] | None = None,
                 on_transfer: Callable | None = None, name=None):
        super().__init__(harness, dut, prefix, name)
        self.idle = idle if idle is not None else never()
        self.on_transfer = on_transfer
        self.queue: collections.deque = collections.deque()
        self._current = None
        self._will_transfer = False

    def send(self, payload: int) -> None:
        """Queue one payload (an int, the packed payload bits)."""
        self.queue.append(int(payload))

    def send_all(self, payloads) -> None:
        self.queue.extend(int(p) for p in payloads)

    @property
    def pending(self) -> int:
        """Items queued or offered but not yet transferred."""
        return len(self.queue) + (self._current is not None)

    def _reset(self) -> None:
        self.valid.value = 0

    def _edge(self, cycle):
        if self._will_transfer:
            item, self._current = self._current, None
            self._record(cycle)
            if self.on_transfer:
                self.on_transfer(cycle, item)
        if self._current is None:
            if self.queue and not next(self.idle):
                self._current = self.queue.popleft()
                if self.payload is not None:
                    self.payload.value = self._current
                self.valid.value = 1
            else:
                self.valid.value = 0

    def _sample(self, cycle):
        self._will_transfer = self._current is not None and _read(self.ready) == 1


class StreamMonitor(_Agent):
    """Passively observes a stream. ``on_transfer(cycle, payload)`` is called for each transfer
    (at the edge it happens, so callbacks may write to the DUT); ``items`` keeps them if
    ``keep=True``."""

    def __init__(self, harness, dut, prefix, *, on_transfer: Callable | None = None,
                 keep: bool = False, name=None):
        super().__init__(harness, dut, prefix, name)
        self.on_transfer = on_transfer
        self.keep = keep
        self.items: list = []
        self._sampled = None

    def _edge(self, cycle):
        if self._sampled is not None:
            payload, self._sampled = self._sampled, None
            self._record(cycle)
            if self.keep:
                self.items.append(payload)
            if self.on_transfer:
                self.on_transfer(cycle, payload)

    def _sample(self, cycle):
        if _read(self.valid) and _read(self.ready):
            self._sampled = int(self.payload.value) if self.payload is not None else 0


class StreamSink(StreamMonitor):
    """Accepts a stream from the DUT, with ``ready`` low on cycles where ``backpressure`` yields True."""

    def __init__(self, harness, dut, prefix, *, backpressure: Iterator[bool] | None = None,
                 on_transfer=None, keep=False, name=None):
        super().__init__(harness, dut, prefix, on_transfer=on_transfer, keep=keep, name=name)
        self.backpressure = backpressure if backpressure is not None else never()

    def _reset(self) -> None:
        self.ready.value = 0

    def _edge(self, cycle):
        super()._edge(cycle)
        self.ready.value = 0 if next(self.backpressure) else 1


class StreamHarness:
    """Clock, reset and the one per-cycle loop that services every agent and the watchdog.

    Parameters:
        dut, clock: the cocotb DUT and its clock signal (``dut.clk``).
        reset: reset signal (default ``dut.rst``, active high, synchronous as in Amaranth).
        period_ns: clock period.
        watchdog_cycles: fail when nothing transfers for this many cycles while
            :attr:`outstanding` returns non-zero (default 1000).

    Members:
        cycle: rising edges since the end of reset.
        cycle_one_ns: simulation time (ns) of cycle 1, so cycle ``c`` is at
            ``cycle_one_ns + (c - 1) * period_ns`` (see :meth:`time_ns`).
        outstanding: ``callable() -> int``; default counts items queued in drivers.
    """

    def __init__(self, dut, clock, *, reset=None, period_ns: int = 10, watchdog_cycles: int = 1000):
        self.dut = dut
        self.clock = clock
        self.reset = reset if reset is not None else dut.rst
        self.period_ns = period_ns
        self.agents: list[_Agent] = []
        self.cycle = 0
        self.outstanding: Callable[[], int] = lambda: sum(
            a.pending for a in self.agents if isinstance(a, StreamDriver))
        self.watchdog = Watchdog(watchdog_cycles, lambda: self.outstanding())
        self.per_cycle: list[Callable[[int], None]] = []   #: extra hooks run at each edge
        self.cycle_one_ns: float | None = None
        self._task = None

    def driver(self, prefix, **kwargs) -> StreamDriver:
        return self._add(StreamDriver(self, self.dut, prefix, **kwargs))

    def sink(self, prefix, **kwargs) -> StreamSink:
        return self._add(StreamSink(self, self.dut, prefix, **kwargs))

    def monitor(self, prefix, **kwargs) -> StreamMonitor:
        return self._add(StreamMonitor(self, self.dut, prefix, **kwargs))

    def _add(self, agent):
        self.agents.append(agent)
        return agent

    async def start(self, *, reset_cycles: int = 2) -> None:
        """Start the clock, hold reset for ``reset_cycles`` cycles, then start servicing agents."""
        for agent in self.agents:
            agent._reset()
        Clock(self.clock, self.period_ns, unit="ns").start()
        self.reset.value = 1
        for _ in range(reset_cycles):
            await RisingEdge(self.clock)
        self.reset.value = 0
        self._task = cocotb.start_soon(self._loop())

    async def _loop(self) -> None:
        edge, settled = RisingEdge(self.clock), ReadOnly()
        agents = self.agents
        while True:
            await edge
            self.cycle += 1
            cycle = self.cycle
            if cycle == 1:
                self.cycle_one_ns = get_sim_time(unit="ns")
            for agent in agents:
                agent._edge(cycle)
            for hook in self.per_cycle:
                hook(cycle)
            await settled
            for agent in agents:
                agent._sample(cycle)
            self.watchdog.tick(cycle)

    def time_ns(self, cycle: int) -> float:
        """Simulation time of the rising edge numbered ``cycle``."""
        return self.cycle_one_ns + (cycle - 1) * self.period_ns

    async def cycles(self, count: int) -> None:
        """Wait ``count`` rising edges."""
        for _ in range(count):
            await RisingEdge(self.clock)

    async def wait_until(self, predicate: Callable[[], bool], *, timeout_cycles: int = 1_000_000,
                         what: str = "condition") -> int:
        """Wait until ``predicate()`` holds at a rising edge; returns the cycle. Fails on timeout."""
        start = self.cycle
        edge = RisingEdge(self.clock)
        while not predicate():
            if self._task is not None and self._task.done():
                self._task.result()   # re-raise the loop's failure (e.g. the watchdog)
            if self.cycle - start > timeout_cycles:
                raise AssertionError(f"timeout after {timeout_cycles} cycles waiting for {what}")
            await edge
        return self.cycle
