"""One phase active at a time per FRED switch, as link data the engine already shares.

The shared spec (FRED.md section 2, "Datapath and control") says a FRED switch serves one
communication phase at a time and that a higher-priority phase preempts (MP > PP > DP); the
packet switch's control unit does exactly that (docs/switch.md, "Control unit": it reads one
VC and serves one phase; another waiting phase is selected only after a drain). So two
transfers that cross a common switch take turns there even where their links are disjoint,
e.g. an MP and a DP all-reduce on different ports of Fred-D's 4-port L1-L2 connection.

The engine (:mod:`sysmodel.engine`) shares links only. This module expresses the switch as one
more *pseudo-link* per switch node, with capacity 1 (a time share: bandwidth 1, its load in
seconds), appended to a transfer's link loads: a transfer that holds switch ``s`` (stores a
phase there and has bytes on a link into or out of it) loads ``s``'s pseudo-link with its busiest-link time alone, so at
full speed it uses the whole switch (share 1) and its time alone is unchanged; at a fraction
``f`` of its speed it holds the switch ``f`` of the time. The engine's max-min filling then
gives, without any change to its loops:

* one transfer alone: unchanged (the pseudo-link's time equals its busiest link's);
* two classes at one switch: strict priority gives the higher level the whole switch, the lower
  one waits (rate ~0) until it ends -- they take turns, MP first -- and the higher one's start
  while the lower is served on the switch costs the measured preemption (``preempt_s``; the
  engine charges it for any shared link, now including the switch);
* two transfers of one level: they share the switch's time (each half), so together they take
  as long as one after the other;
* transfers that share no switch: unchanged.

Which transfers hold a switch: a transfer holds the switches where its collectives store a
phase (``CollectiveResult.configurations``): in-switch collectives, the I/O controllers'
in-switch multicast and reduce, and endpoint algorithms' routes where the platform configures
them (``[fred] unicast_routing = "configured"``). Endpoint algorithms' unicasts routed online
(the paper's default index, ``unicast_routing = "online"``) hold none: the default index is
one phase per VC that every online packet of that VC shares (docs/switch.md, "Online unicast
routing"), so two online transfers of one class run together in the RTL, while the model
would count them as two phases taking turns (the engine's time share is additive); they share
links only, by priority, as before. The mesh has routers, no phases: nothing is held there.

What the fluid share leaves out (docs/sysmodel.md, "One phase active at a time"): within one
level the packet switch keeps the active phase while it has packets waiting (turns, not an
even split; the last to finish ends at the same time either way); an online transfer and a
stored phase (or online transfers of two VCs) on disjoint links of one switch run together in
the model, in turns in the RTL; the L2 is one logical switch in the model (one resource),
whereas the RTL's L2 is built from planes, one per uplink port, each with its own phase.
"""

from __future__ import annotations

import weakref

import numpy as np

from sysmodel.collectives import build_network

__all__ = ["holds_switches", "switch_links", "stored_switches", "collective_links", "transfer_links"]

#: network -> its :func:`switch_links`, built once per network
_SWITCHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def holds_switches(platform, net) -> bool:
    """Whether transfers on ``net`` hold the switches they cross (FRED fabrics, unless the
    platform's ``[fred] one_phase_per_switch`` is false: a documented what-if)."""
    return getattr(net, "kind", None) == "fred" and platform.one_phase_per_switch


def switch_links(net) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """The switch nodes of ``net`` (in node order), the ids of each one's links (either
    direction), and the bandwidth array of ``net``'s links extended by one pseudo-link
    (bandwidth 1) per switch."""
    found = _SWITCHES.get(net)
    if found is None:
        nodes = [n for n, kind in enumerate(net.node_kind) if kind == "switch"]
        incident = [np.flatnonzero((net.link_src == s) | (net.link_dst == s)) for s in nodes]
        bw = np.concatenate([np.asarray(net.link_bw, dtype=float), np.ones(len(nodes))])
        found = _SWITCHES[net] = (nodes, incident, bw)
    return found


def stored_switches(result) -> frozenset:
    """The switch nodes where a :class:`~sysmodel.collectives.CollectiveResult`'s collectives
    store a phase (the first of each ``configurations`` triple)."""
    return frozenset(node for node, _, _ in result.configurations)


def collective_links(platform, fabric: str, result) -> tuple:
    """:func:`transfer_links` of a :class:`~sysmodel.collectives.CollectiveResult` of
    ``fabric`` on ``platform`` (its network from the model's cache): its link loads and
    bandwidths, holding the switches where it stores a phase."""
    return transfer_links(platform, build_network(platform, fabric), result.link_loads,
                          result.link_bw, stored_switches(result))


def transfer_links(platform, net, loads, bw, switches) -> tuple:
    """The (loads, bandwidths) a transfer with link ``loads`` (bytes per link of ``net``) and
    bandwidths ``bw`` carries into the engine when it holds the switch nodes ``switches``:
    unchanged where :func:`holds_switches` is false or nothing is loaded; else with one
    pseudo-link per switch of ``net``, loaded with the transfer's busiest-link time alone (s)
    at the switches in ``switches`` it crosses, 0 elsewhere (module docstring)."""
    if loads is None or bw is None or not holds_switches(platform, net):
        return loads, bw
    loads = np.asarray(loads, dtype=float)
    if not np.any(loads > 0):
        return loads, bw
    nodes, incident, held_bw = switch_links(net)
    t_alone = float((loads / np.asarray(bw, dtype=float)).max())
    held = np.array([t_alone if node in switches and np.any(loads[links] > 0) else 0.0
                     for node, links in zip(nodes, incident)])
    if bw is not net.link_bw:
        held_bw = np.concatenate([np.asarray(bw, dtype=float), np.ones(len(incident))])
    return np.concatenate([loads, held]), held_bw
