"""GPU-driven in-switch collectives: NVLink SHARP's (NVLS) multimem protocol on a switch tree.

FRED's in-switch collectives are switch-driven flows (:mod:`sysmodel.collectives`): every NPU
pushes its data up once, the switches reduce it on the way and replicate the sum on the way
down, so each NPU link carries the data once per direction. NVIDIA's NVSwitch with NVLink
SHARP is the only in-network all-reduce measured in public (docs/sysmodel.md, "In-switch
efficiency"), and it is GPU-driven: the GPUs issue the switch's loads and stores. The NCCL
maintainers' accounting per GPU, for a collective of ``S`` bytes on ``N`` GPUs
(https://github.com/NVIDIA/nccl/issues/1083, data/validation/nccl_collectives.toml):

* **reduce-scatter** (``multimem.ld_reduce``): each GPU asks the switch for its 1/N shard; the
  switch reads that shard from every GPU, reduces it and returns the sum: a GPU's link sends
  ``S`` (its whole buffer, read shard by shard by the N requesters) and receives ``S/N``.
* **all-gather** (``multimem.st``): each GPU stores its shard once into the switch, which
  writes a copy to every GPU: a GPU sends ``S/N`` and receives ``S``.
* **all-reduce** = the two back to back, pipelined chunk by chunk (the reduced shard comes
  back to its GPU, which multicasts it): ``S + S/N`` in each direction.

The ring moves ``2(N-1)/N x S`` per direction for an all-reduce and ``(N-1)/N x S`` for the
other two, so at equal link rates NVLS all-reduce wins by ``2(N-1)/(N+1)`` (1.56x on 8 GPUs,
none on 3) and NVLS all-gather / reduce-scatter lose by ``N/(N-1)``.

The bytes are timed on the model's network like every other traffic: each link's load at its
rate (``link_efficiency`` of line rate), with the multimem bytes counting
``1 / in_switch_efficiency`` each (the variant's
:attr:`~sysmodel.platform.FredVariant.in_switch_efficiency`: what NVSwitch's multicast /
reduction path reaches relative to point-to-point traffic, fitted on one measured point in
``configs/dgx-h100.toml``). Latency: the hop chain, up to the L1 switch and back, once per
phase (two for an all-reduce); it is what limits small messages, the validation's are large.

Only groups under one L1 switch: NVLS is an intra-node (one NVSwitch domain) mechanism.
"""

from __future__ import annotations

from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, build_network
from sysmodel.fred_tree import FredTreeNetwork
from sysmodel.network import Traffic
from sysmodel.platform import Platform

__all__ = ["MULTIMEM_OPS", "multimem_bytes", "multimem_traffic", "multimem_time_s"]

#: The collectives the multimem protocol runs.
MULTIMEM_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def multimem_bytes(op: str, size: float, n: int) -> tuple[float, float]:
    """(bytes a GPU sends, bytes it receives) for ``op`` of ``size`` bytes on ``n`` GPUs
    (the module docstring's accounting)."""
    if op not in MULTIMEM_OPS:
        raise FredError(f"the multimem (NVLS) protocol runs {', '.join(MULTIMEM_OPS)}, not {op!r}")
    if n < 2:
        raise FredError(f"{op} with the multimem protocol needs at least 2 GPUs, got {n}")
    shard = size / n
    return {"reduce-scatter": (size, shard),
            "all-gather": (shard, size),
            "all-reduce": (size + shard, shard + size)}[op]


def multimem_traffic(net: FredTreeNetwork, c: Collective) -> Traffic:
    """The traffic of ``c`` (an all-reduce, reduce-scatter or all-gather whose group is under
    one L1 switch) run with the multimem protocol on ``net``: each member's uplink carries
    what it sends, its downlink what it receives, both at ``1 / net.in_switch_efficiency``
    wire bytes per byte."""
    if not isinstance(net, FredTreeNetwork):
        raise FredError(f"the multimem (NVLS) protocol needs a switch tree, not {net.name!r}")
    c.check(net.npus)
    l1s = {net.l1_of(r) for r in c.group}
    if len(l1s) != 1:
        raise FredError(f"{c.op} with the multimem (NVLS) protocol needs its group under one L1 "
                        f"switch; group {list(c.group)} spans {len(l1s)}")
    send, receive = multimem_bytes(c.op, c.size, len(c.group))
    top = net.l1_nodes[l1s.pop()]
    t = net.traffic()
    round_trip = 0.0
    for r in c.group:
        up, down = net.path(r, top), net.path(top, r)
        t.add_links(up, send / net.in_switch_efficiency)
        t.add_links(down, receive / net.in_switch_efficiency)
        t.sent[r] += send
        round_trip = max(round_trip, net.path_latency(up + down))
    t.latency_s = round_trip * (2 if c.op == "all-reduce" else 1)
    return t


def multimem_time_s(platform: Platform, fabric: str, c: Collective) -> float:
    """Seconds ``c`` takes with the multimem protocol on ``fabric`` of ``platform``."""
    net = build_network(platform, fabric)
    if not isinstance(net, FredTreeNetwork):
        raise FredError(f"the multimem (NVLS) protocol needs a switch-tree fabric, not {fabric!r}")
    return multimem_traffic(net, c).time()
