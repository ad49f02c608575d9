"""What a preemption costs on each link of a FRED network: each switch's own measured drain.

A transfer of a higher class (MP > PP > DP) that starts while a lower one is being served on a
link it uses preempts it (:class:`sysmodel.engine.Engine`). In the packet switch the higher
packet's header makes the control unit drain the lower phase's packets in flight, then select
the higher phase (docs/switch.md, "Control unit"). The select is paid at an idle switch too,
and the preempting transfer's time alone already counts it (the phase selects of
:mod:`sysmodel.collectives`); what preempting adds is the drain. The characterization measures
it per design: ``reconfiguration_cycles_busy - reconfiguration_cycles_idle``
(:attr:`sysmodel.switch_timing.SwitchTiming.preemption_cycles`, ``fred characterize
--packet-switch``), e.g. 10 cycles on Fred_3(8) int32 and 8 on Fred_3(5) int32.

:func:`preemption_costs` gives the engine a first cost per link (docs/sysmodel.md, "Preemption"):

* a switch's pseudo-links (:mod:`sysmodel.switch_phases`: its stored phases' and its default
  phase's): that switch's drain;
* a link: the larger drain of the switches at its ends, plus, when the link is slower than a
  switch port (one flit per cycle), the extra time a packet in flight takes to cross it
  (``packet_flits`` flits at the link's rate instead of one per cycle): the drain waits for
  the tail of the lower class's packet on that link.

The drains along a path add up where the lower class keeps flowing (a per-cycle probe of the
packet fabric, docs/fabric_validation.md, "Drains along a path"; ``python -m
studies.preemption_trace``). A switch learns of the higher class when its first packet
arrives. The switches the preempting transfer enters from its own endpoints (its L1s) drain
at once, in parallel: the largest of their costs, once. A switch *further on* (one no
endpoint attaches to: the L2) starts its own drain only when the higher packet arrives, after
the switches before it have drained; what it finds there depends on the lower class:

* a lower class in a stored phase there (an in-switch collective: the L2's reduction needs
  the operands of every L1 in its group) has stalled: the L1s that switched to the higher
  class stopped feeding it, so the L2 selects at once (Fred-D and Fred-B: 1 DRAIN cycle at
  the L2 on the 6-NPU fabrics); the charge stays the largest cost once;
* a lower class routed online there (endpoint algorithms' unicasts, Fred-A/C: in the L2's
  default phase) keeps flowing: its packets from the L1s the higher class does not cross,
  and those the L1s drained onto the uplinks, keep the L2 serving it, and the L2 drains them
  in turn (paper-size Fred-A: 23 DRAIN cycles at the L2, 93 DP flits entering it while the
  L1s drained): the drains along the path add.

So :func:`preemption_costs` gives two rows when a switch is further on: the first
(``first``) per link as above; the second (``further``) nonzero only on the default-phase
pseudo-link of each switch further on: the drains along the path to it (:func:`path_drain_s`:
its own, plus the largest of the switches feeding it, each with the tail of a packet on a slow
output). The engine charges the largest first-row cost where it preempts or, if larger, the
largest second-row cost of a lower transfer's *own* link where it preempts it
(:class:`sysmodel.engine.Engine`): a lower transfer holding that switch's default phase is
routed online there. What it leaves out: a preempting transfer that meets an online lower
class only further on (none at its L1s) is charged the L1's drain too.
"""

from __future__ import annotations

import weakref

import numpy as np

from sysmodel.switch_phases import holds_switches, switch_links

__all__ = ["preemption_costs", "switch_drain_s", "path_drain_s"]

#: network -> {holds switches: costs}, built once per network
_COSTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def switch_drain_s(net, node: int) -> float:
    """Seconds switch ``node`` of ``net`` takes to drain a lower phase it preempts (its
    level's measured ``preemption_cycles``)."""
    timing = net.switch_timing(node)
    return timing.preemption_cycles * timing.cycle_s


def _slow_link_s(net, link: int, node: int) -> float:
    """Seconds a packet in flight takes to cross ``link`` beyond crossing a port of switch
    ``node`` at one flit per cycle (0 on a link at least as fast as a port)."""
    timing = net.switch_timing(node)
    flits = timing.preemption_packet_flits
    on_link = flits * timing.flit_bytes / float(net.link_bw[link])   # link_bw: bytes/s
    return max(0.0, on_link - flits * timing.cycle_s)


def _neighbours(net, node: int) -> tuple[np.ndarray, np.ndarray]:
    """The nodes with a link into ``node`` and the ids of those links."""
    into = np.flatnonzero(net.link_dst == node)
    return net.link_src[into], into


def _further_on(net, node: int) -> bool:
    """Whether switch ``node`` is one no endpoint attaches to (reached only through other
    switches: a FRED tree's L2)."""
    kind = net.node_kind
    ends = np.concatenate([net.link_dst[net.link_src == node], net.link_src[net.link_dst == node]])
    return all(kind[int(n)] == "switch" for n in ends)


def _own_drain_s(net, node: int) -> float:
    """Switch ``node``'s drain plus the extra time a packet in flight takes on its slowest
    output (the drain waits for the tail of the lower class's packet there)."""
    outputs = np.flatnonzero(net.link_src == node)
    return switch_drain_s(net, node) + max((_slow_link_s(net, int(link), node) for link in outputs),
                                           default=0.0)


def path_drain_s(net, node: int, _seen=()) -> float:
    """Seconds the drains along a path to switch ``node`` add up to when the lower class keeps
    flowing at every switch on it (module docstring): its own drain (with a slow output's
    packet tail), plus, for a switch further on, the largest :func:`path_drain_s` of the
    switches with a link into it (they drain first; the higher packet reaches ``node`` after
    them). A switch with an endpoint attached: its own drain."""
    own = _own_drain_s(net, node)
    if not _further_on(net, node):
        return own
    kind = net.node_kind
    feeding = [int(n) for n, _ in zip(*_neighbours(net, node))
               if kind[int(n)] == "switch" and int(n) not in _seen]
    return own + max((path_drain_s(net, n, _seen + (node,)) for n in feeding), default=0.0)


def preemption_costs(platform, net) -> np.ndarray:
    """The preemption costs (s) of ``net``'s links, followed by its switch pseudo-links when
    transfers hold switches there (:func:`~sysmodel.switch_phases.holds_switches`): the
    ``preempt_s`` of :class:`sysmodel.engine.Engine` (module docstring). One row (one cost
    per link) when no switch is held or none is further on; else two rows, ``[first,
    further]``. Switch nodes only: a link between two endpoints costs nothing."""
    held = holds_switches(platform, net)
    found = _COSTS.setdefault(net, {})
    if held not in found:
        kind = net.node_kind
        costs = np.zeros(len(net.link_bw))
        for link, (src, dst) in enumerate(zip(net.link_src, net.link_dst)):
            ends = [int(n) for n in (src, dst) if kind[n] == "switch"]
            if ends:
                costs[link] = max(switch_drain_s(net, n) + _slow_link_s(net, link, n) for n in ends)
        if held:   # both pseudo-links of a switch (stored and default phase): its drain
            nodes, _, _ = switch_links(net)
            drains = [switch_drain_s(net, n) for n in nodes]
            first = np.concatenate([costs, drains, drains])
            # a switch further on: its default phase (online lower classes keep flowing there)
            # costs the drains along the path to it
            further = np.zeros_like(first)
            for i, n in enumerate(nodes):
                if _further_on(net, n):
                    further[len(costs) + len(nodes) + i] = path_drain_s(net, n)
            costs = np.vstack([first, further]) if np.any(further > 0) else first
        found[held] = costs
    return found[held]
