"""The striped I/O request on Fred-B/D: one multicast (reduce) tree per I/O controller, all at
once, sharing the switches' outputs (inputs) -- the compiler side of "Striped I/O on Fred-B/D"
(docs/fabric_rtl.md), which the packet switch does not serve yet (one stored phase per VC at a
time, its flows on disjoint ports).

Pure Python. Stripe ``k``'s tree is the in-switch flow set of an ``io-broadcast``
(``io-reduce``) rooted at controller ``k`` (:func:`hdl.compiler.fabric_program.in_switch_flows`),
on uplink port ``k mod uplink_ports`` of every L1 (the model's one logical L1-L2 link spread
over the ports). At one switch many trees take the *same* flow (at an L1, every tree of a
controller on another L1 is "downlink -> the L1's NPUs"), so a switch holds few distinct flows,
each carrying several stripes' packets:

* :func:`stripe_tree_flows`: per switch, the distinct flows and the stripes on each, every flow
  routed alone on the switch's Fred_m(P) (its own configuration slot), refused by name when a
  switch would need more slots than the RTL stores;
* :func:`output_sharing`: per output port of a switch, how many of its flows send there (the
  flows a per-packet output arbiter interleaves);
* :func:`stripe_packet_order`: the one packet order every sender follows (packet ``p`` of stripe
  0, 1, ..., C - 1, then packet ``p + 1``), so that at every switch each reduce flow's packet
  is at the head of all its inputs in turn (each input carries the order's packets of its
  flows, in order: the lowest packet not yet sent is at the head of every input it uses);
* :func:`home_late_order`, :func:`home_stripes`, :func:`home_delay`: the reduce-out's order per
  L1 (docs/fabric_rtl.md, "Fred-B's weight streaming and reduce-out on the fabric", point 9):
  an L1's NPUs send the packets of the stripes whose controller is on their own L1 (*home*
  stripes) ``delay`` places later in the one order, so their partial sum from the L2 is
  already waiting at the downlink input; ``delay`` is the largest the downlink inputs' depth
  keeps deadlock-free (:func:`home_delay`'s window rule), at most one round.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.compiler import Flow, Router
from hdl.compiler.fabric_program import in_switch_flows, plane_flows, switch_label
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import IO_OPS, SWITCH_PHASES, FabricCollective, FabricSpec
from hdl.contracts.packet import stream_packets

__all__ = ["SharedFlow", "stripe_tree_flows", "output_sharing", "stripe_packet_order", "home_stripes",
           "home_late_order", "home_delay"]


@dataclass(frozen=True)
class SharedFlow:
    """One distinct flow of the striped trees at one switch and the stripes whose packets take
    it (each stripe's packets carry their stripe as the header's flow id)."""

    flow: Flow
    stripes: tuple[int, ...]


def stripe_tree_flows(spec: FabricSpec, op: str, *, phases: int = SWITCH_PHASES) -> list[list[SharedFlow]]:
    """Per switch (the L1s, then the L2 planes; :func:`~hdl.compiler.fabric_program.switch_label`
    names them) the distinct flows of the ``spec.io_controllers`` stripe trees of ``op`` over
    every NPU, in first-use order, with their stripes. FredError, naming what is wrong, for a
    fabric that does not reduce in its switches, no controllers, a flow that does not route
    alone, or more distinct flows at a switch than ``phases`` slots."""
    if op not in IO_OPS:
        raise FredError(f"the striped I/O trees run {' or '.join(IO_OPS)}; got op {op!r}")
    if not spec.in_switch:
        raise FredError(f"{spec.name} neither multicasts nor reduces in its switches: its striped I/O "
                        f"is the chains of hdl.compiler.io_stripe_program")
    if spec.io_controllers < 1:
        raise FredError(f"{op} striped over the I/O controllers needs controllers; {spec.name} has none")
    members = tuple(range(spec.npus))
    per_switch: list[dict[Flow, list[int]]] = [{} for _ in spec.switch_ports]
    for k in range(spec.io_controllers):
        coll = FabricCollective(op, members, spec.npus + k)
        flows = in_switch_flows(spec, coll, None, uplink=k % spec.uplink_ports)
        for plane, counted in plane_flows(spec, [(f, None) for f in flows.pop(spec.l1_count, [])]).items():
            flows[spec.l1_count + plane] = [f for f, _ in counted]
        for s, switch_flows in flows.items():
            for flow in switch_flows:
                per_switch[s].setdefault(flow, []).append(k)
    return [_routed(spec, s, shared, phases) for s, shared in enumerate(per_switch)]


def _routed(spec: FabricSpec, s: int, shared: dict[Flow, list[int]], phases: int) -> list[SharedFlow]:
    name = switch_label(spec.l1_count, spec.l2_planes, s)
    ports = spec.switch_ports[s]
    if len(shared) > phases:
        raise FredError(f"the striped trees take {len(shared)} distinct flows on switch {name}; "
                        f"each needs its own configuration slot and the RTL stores {phases}")
    router = Router(ports=ports, middle=spec.middle)
    for flow in shared:
        config, status = router.try_one_phase((flow,))
        if config is None:
            raise FredError(f"flow {flow} of the striped trees does not route on switch {name} "
                            f"(Fred_{spec.middle}({ports})): {status}")
    return [SharedFlow(flow, tuple(stripes)) for flow, stripes in shared.items()]


def output_sharing(flows: list[SharedFlow]) -> dict[int, int]:
    """``{output port: flows of ``flows`` sending to it}``, for the ports that have any."""
    count: dict[int, int] = {}
    for shared in flows:
        for port in shared.flow.outputs:
            count[port] = count.get(port, 0) + 1
    return dict(sorted(count.items()))


def stripe_packet_order(stripes: int, stripe_flits: int, packet_flits: int) -> list[tuple[int, int]]:
    """The packet order every sender of the striped trees follows: ``(stripe, packet number)``,
    packet ``p`` of every stripe in stripe order, then ``p + 1`` (a stripe of ``stripe_flits``
    takes ``ceil(stripe_flits / packet_flits)`` packets, the last one short)."""
    for name, value in (("stripes", stripes), ("stripe_flits", stripe_flits), ("packet_flits", packet_flits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FredError(f"{name} must be a positive integer, got {value!r}")
    packets = stream_packets(stripe_flits, packet_flits)
    return [(k, p) for p in range(packets) for k in range(stripes)]


def home_stripes(spec: FabricSpec, l1: int) -> tuple[int, ...]:
    """The stripes whose controller is on L1 ``l1`` (:meth:`FabricSpec.port_of`): the stripes whose
    reduce tree ends at that L1 (its NPUs' packets there meet the L2's partial sum from the
    downlink of uplink ``k mod uplink_ports``)."""
    if isinstance(l1, bool) or not isinstance(l1, int) or not 0 <= l1 < spec.l1_count:
        raise FredError(f"l1 must be in 0..{spec.l1_count - 1}, got {l1!r}")
    return tuple(k for k in range(spec.io_controllers) if spec.port_of(spec.npus + k)[0] == l1)


def home_late_order(stripes: int, stripe_flits: int, packet_flits: int, home, delay: int) -> list[tuple[int, int]]:
    """The order an NPU sends its packets in the striped reduce-out: :func:`stripe_packet_order`
    (index ``n``) with each packet of a ``home`` stripe moved ``delay`` places later, i.e. sorted
    by the key ``n`` (others) or ``n + delay + 1/2`` (home): a home packet ``n`` goes right
    after the other stripes' packet ``n + delay`` (or at the end). ``delay`` 0 is the one order.
    The golden model of :class:`~hdl.designs.fabric.tree_stripe_npu.TreeStripeNpu`'s two cursors."""
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise FredError(f"delay must be an integer >= 0, got {delay!r}")
    home = frozenset(home)
    if not home <= set(range(stripes)):
        raise FredError(f"home stripes {sorted(home)} must be in 0..{stripes - 1}")
    order = stripe_packet_order(stripes, stripe_flits, packet_flits)
    keyed = sorted((2 * (n + delay) + 1 if k in home else 2 * n, (k, p)) for n, (k, p) in enumerate(order))
    return [item for _, item in keyed]


def home_delay(spec: FabricSpec, stripe_flits: int, packet_flits: int, depth: int) -> int:
    """The largest ``delay`` (at most one round: ``spec.io_controllers`` packets) for
    :func:`home_late_order` that keeps the striped reduce-out deadlock-free on ``spec`` with
    input buffers of ``depth`` flits per data VC (docs/fabric_rtl.md, point 9, the argument):
    for every L1 ``h`` and uplink ``u``, every ``delay + 1`` consecutive packets of the one
    order hold at most ``depth // packet_flits`` packets of the stripes whose tree comes down
    to ``h`` on ``u`` (home at ``h``, ``k mod uplink_ports = u``): an L2 that waits for room on
    that downlink then waits for a home packet that is more than ``delay`` places earlier
    (so the L1 can take it without the other stripes' packets sent after it). 0 (the one order)
    when no delay is safe. FredError for a depth below a packet."""
    for name, value in (("stripe_flits", stripe_flits), ("packet_flits", packet_flits), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FredError(f"{name} must be a positive integer, got {value!r}")
    if depth < packet_flits:
        raise FredError(f"an input buffer of {depth} flits holds no whole packet of {packet_flits}")
    room = depth // packet_flits
    order = stripe_packet_order(spec.io_controllers, stripe_flits, packet_flits)
    downlink = {k: (spec.port_of(spec.npus + k)[0], k % spec.uplink_ports) for k in range(spec.io_controllers)}
    places: dict[tuple[int, int], list[int]] = {}
    for n, (k, _) in enumerate(order):
        places.setdefault(downlink[k], []).append(n)
    # the shortest run of consecutive places holding room + 1 packets of one downlink: a window
    # of delay + 1 places must be shorter
    span = min((at[i + room] - at[i] + 1 for at in places.values() for i in range(len(at) - room)),
               default=len(order) + 1)
    return min(span - 2, spec.io_controllers)
