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

:func:`preemption_costs` gives the engine one cost per link (docs/sysmodel.md, "Preemption"):

* a switch's pseudo-links (:mod:`sysmodel.switch_phases`: its stored phases' and its default
  phase's): that switch's drain;
* a link: the larger drain of the switches at its ends, plus, when the link is slower than a
  switch port (one flit per cycle), the extra time a packet in flight takes to cross it
  (``packet_flits`` flits at the link's rate instead of one per cycle): the drain waits for
  the tail of the lower class's packet on that link.

The engine charges a preempting transfer the largest cost among the links where it meets a
lower class being served, once: the switches on a path drain in parallel, and a switch further
on finds the lower class already stalled by the first (a per-cycle probe of the packet fabric,
docs/fabric_validation.md, "Preemption per switch").
"""

from __future__ import annotations

import weakref

import numpy as np

from sysmodel.switch_phases import holds_switches, switch_links

__all__ = ["preemption_costs", "switch_drain_s"]

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


def preemption_costs(platform, net) -> np.ndarray:
    """One preemption cost (s) per link of ``net``, followed by one per switch pseudo-link when
    transfers hold switches there (:func:`~sysmodel.switch_phases.holds_switches`): the
    ``preempt_s`` array of :class:`sysmodel.engine.Engine` (module docstring). Switch nodes
    only: a link between two endpoints costs nothing."""
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
            costs = np.concatenate([costs, drains, drains])
        found[held] = costs
    return found[held]
