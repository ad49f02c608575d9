"""``WaferCollective``: the wafer-wide start and end of one I/O collective of an iteration
(docs/fabric_iteration.md, "Weight streaming"): the NPUs' trace sequencers reach the I/O node
one by one; the I/O units (the NPUs' and the controllers') start together once every NPU is
there, and the node ends for every NPU once every unit is done. Used by the mesh's I/O
iteration top and by the packet FRED fabric's (:mod:`.packet_io_iteration_top`)."""

from __future__ import annotations

from amaranth import Module, Signal

from hdl.designs.fabric.cut import exchange_fields, exchanged

__all__ = ["WaferCollective", "all_of", "any_of", "COLLECTIVE_CUT_FIELDS", "collective_cut_fields", "collective_cut"]

#: What a split collective's halves exchange across a cut (:class:`WaferCollective`'s ``cut``):
#: "every one of my NPUs arrived", "my units ready", "my units done".
COLLECTIVE_CUT_FIELDS = (("io_arrived", 1), ("io_ready", 1), ("io_done", 1))


def collective_cut_fields(part: int) -> list[tuple[str, str, int]]:
    """The cut fields of part ``part``'s half of a split collective
    (``hdl.designs.fabric.cut.exchange_fields`` of :data:`COLLECTIVE_CUT_FIELDS`): appended by
    both parts at the same place of their field lists."""
    return exchange_fields(part, COLLECTIVE_CUT_FIELDS)


def collective_cut(component, fields, part: int) -> tuple:
    """:class:`WaferCollective`'s ``cut`` of one part of a cut top: ``(out, in)``, this part's
    three signals and the other part's, slices of ``component``'s ``cut_out`` / ``cut_in``
    (``fields``: the component's whole field list, :func:`collective_cut_fields` among them)."""
    halves = [exchanged(component, fields, part, name) for name, _ in COLLECTIVE_CUT_FIELDS]
    return tuple(h[0] for h in halves), tuple(h[1] for h in halves)


def all_of(signals):
    """1 when every one of ``signals`` is high (1 for none)."""
    signals = list(signals)
    return sum(signals) == len(signals) if signals else 1


def any_of(signals):
    """1 when any of ``signals`` is high (0 for none)."""
    signals = list(signals)
    return sum(signals) != 0 if signals else 0


class WaferCollective:
    """Logic built into ``m`` for the sequencers ``seqs`` (each with ``engine_start``, Out,
    and ``engine_done``, In, as :class:`~.trace_sequencer.TraceSequencer`'s):

    * ``arrived[r]`` from NPU r's engine start to the collective's start;
    * ``reached`` (comb) when no collective is active and every NPU has arrived (its engine
      start this cycle counts): e.g. a controller's loader may then write the entries it
      defers to the node (as an NPU's sequencer releases them at its node);
    * ``go`` (comb): ``reached`` and ``ready`` (e.g. every controller's program loaded;
      default 1);
    * ``unit_start`` the cycle after ``go``: the units' start pulse;
    * ``active`` from the cycle after ``go`` until ``over``; ``count``: collectives started;
    * ``over`` (comb): ``units_done`` (driven by the top), seen from the second cycle after
      ``unit_start`` on, so a unit's ``done`` of the run before (cleared by its start) is
      never taken for this run's;
    * each NPU's ``engine_done`` from ``over`` on until its own next engine start.

    Latency: 1 cycle from the last NPU's engine start to ``unit_start``; 1 cycle from the
    units' done to the NPUs' ``engine_done`` (the sequencers' nodes end the cycle after).

    ``cut`` (default None: the whole wafer's): the collective of one part of a fabric cut for
    the lock-step simulator (``eda/fabric/lockstep.py``), ``seqs``, ``ready`` and
    ``units_done`` being this part's. ``cut`` is ``(out, in)``, each three 1-bit signals
    ``(arrived, ready, done)``: this part drives ``out`` (every one of its NPUs has arrived,
    its ``ready``, its ``units_done``) and reads the other part's of the same cycle as ``in``;
    ``reached``, ``go`` and ``over`` need both. Each part keeps its own copy of the collective's
    state (``active``, ``count``, ...), which moves on the same two halves in both, so the
    copies stay equal cycle for cycle; exact because ``out`` depends only on the part's
    registers (the sequencers' ``engine_start``, the controllers' ``ready`` and the units'
    ``done`` are registered or follow from registers: the lock-step rule for a cut signal,
    checked by the joined parts' bench).
    """

    def __init__(self, m: Module, seqs, *, ready=1, cut=None):
        self.unit_start, self.active, self.over = Signal(), Signal(), Signal()
        self.units_done, self.count = Signal(), Signal(32)
        arrived = [Signal(name=f"arrived_{r}") for r in range(len(seqs))]
        self.reached, self.go = Signal(), Signal()
        go = self.go
        settle, finished = Signal(2), Signal()
        everyone = all_of(a | s.engine_start for a, s in zip(arrived, seqs))
        all_ready, done = ready, self.units_done
        if cut is not None:     # this part's halves out, the other part's in
            (arrived_out, ready_out, done_out), (arrived_in, ready_in, done_in) = cut
            m.d.comb += [arrived_out.eq(everyone), ready_out.eq(ready), done_out.eq(self.units_done)]
            everyone, all_ready, done = everyone & arrived_in, all_ready & ready_in, done & done_in
        m.d.comb += [self.reached.eq(~self.active & everyone),
                     go.eq(self.reached & all_ready),
                     self.over.eq(self.active & (settle == 0) & ~self.unit_start & done)]
        m.d.sync += self.unit_start.eq(go)
        with m.If(go):
            m.d.sync += [self.active.eq(1), settle.eq(2), finished.eq(0), self.count.eq(self.count + 1)]
        with m.Elif(self.over):
            m.d.sync += [self.active.eq(0), finished.eq(1)]
        with m.If(settle != 0):
            m.d.sync += settle.eq(settle - 1)
        for a, seq in zip(arrived, seqs):
            with m.If(go):
                m.d.sync += a.eq(0)
            with m.Elif(seq.engine_start):
                m.d.sync += a.eq(1)
            m.d.comb += seq.engine_done.eq(finished & ~a)
