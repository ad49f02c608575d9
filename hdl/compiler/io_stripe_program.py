"""The striped I/O request on the packet FRED fabric: every I/O controller at once, each a
stripe to (from) every NPU of the group -- the mesh's weight streaming and gradient reduce-out
(docs/mesh_rtl.md, "I/O controllers on the mesh") on Fred-A/C, whose switches cannot replicate
or reduce (docs/fabric_rtl.md, "I/O controllers", "Striped I/O: every controller at once").

Pure Python. :func:`io_stripe_program` computes what each endpoint (NPU or controller) has to
do for each stripe, from the chain the system model times (``sysmodel.collectives._fred_io_chain``
and this module both take :func:`hdl.compiler.algorithms.io_chain_order`):

* the request: ``size_flits`` per NPU, split into one stripe of ``size_flits / C`` flits per
  controller (``C`` = ``spec.io_controllers``); stripe ``k`` holds data indices
  ``k * S .. (k + 1) * S - 1`` (``S`` the stripe's flits), so a flit's index names its stripe;
* ``io-broadcast`` (weight streaming): controller ``k`` sends its stripe to the first member of
  its chain (a member on its own L1); each member forwards it to the next member; the last one
  keeps it. The data is controller ``k``'s memory, ``w_k * mix(i, l) + h_k`` with ``(w_k, h_k)``
  = :func:`~hdl.contracts.npu_engine.rank_weights` of the controller's endpoint, every member
  checking it;
* ``io-reduce`` (gradient reduce-out): the same chain reversed; the first member (the last of
  the broadcast's chain) sends its own stripe ``k``, every later member adds its own to what
  arrives and sends the sum on, the last one to controller ``k``, which checks the sum of every
  member's weights.

:class:`StripeStep` is one endpoint's part in one stripe (from whom it receives it, to whom it
sends it, whether it adds its own data, the weights of what it receives). The program is what
an engine carrying up to ``C`` chains at once would be loaded with; its receive side must tell
the stripes apart (they interleave per packet at a member: the stream of the member before it
and its controller's stripe share its L1's output to it), which the RTL's one-sender NPU engine
cannot (docs/fabric_rtl.md, "Striped I/O: every controller at once", says what is missing).
:func:`endpoint_pair_flits` and :func:`endpoint_totals` give the flits per sender/receiver
pair and per endpoint, the loads both sides must agree on.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.compiler import algorithms
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import IO_OPS, FabricSpec
from hdl.contracts.npu_engine import rank_weights

__all__ = ["StripeStep", "IoStripeProgram", "io_stripe_program", "endpoint_pair_flits", "endpoint_totals", "npu_own",
           "receiver_entries"]

_MASK = 0xFFFFFFFF


@dataclass(frozen=True)
class StripeStep:
    """Endpoint ``endpoint``'s part in stripe ``stripe``: it receives the stripe's ``flits``
    from ``source`` (None: it starts the stripe with its own data) and checks them against
    ``(wr, hr)`` (the weights the received data sums); it sends them to ``dest`` (None: it
    keeps them), adding its own data ``(ws, hs)`` first when ``adds``. Data indices ``org`` ..
    ``org + flits - 1``."""

    endpoint: int
    stripe: int
    source: int | None
    dest: int | None
    adds: bool
    wr: int
    hr: int
    ws: int
    hs: int
    org: int
    flits: int


@dataclass
class IoStripeProgram:
    """The striped I/O request's steps: ``chains[k]`` the members in controller ``k``'s chain
    order (:func:`~hdl.compiler.algorithms.io_chain_order`, the broadcast's direction);
    ``steps[e]`` endpoint ``e``'s :class:`StripeStep` per stripe it takes part in, by stripe."""

    op: str
    size_flits: int
    stripe_flits: int
    chains: tuple[tuple[int, ...], ...]
    steps: list[dict[int, StripeStep]]

    @property
    def controllers(self) -> int:
        return len(self.chains)


def _sum_weights(pairs) -> tuple[int, int]:
    w = h = 0
    for pw, ph in pairs:
        w, h = (w + pw) & _MASK, (h + ph) & _MASK
    return w, h


def _check(spec: FabricSpec, op: str, size_flits: int, group, *, trees: bool = False) -> tuple[int, ...]:
    """The group's members, or FredError naming what the striped request cannot run (``trees``:
    as Fred-B/D's in-switch trees, :func:`hdl.compiler.io_stripe_shared.shared_io_program`,
    else as Fred-A/C's chains)."""
    if op not in IO_OPS:
        raise FredError(f"the striped I/O request runs {' or '.join(IO_OPS)}; got op {op!r}")
    if trees and not spec.in_switch:
        raise FredError(f"{spec.name} neither multicasts nor reduces in its switches: its striped I/O "
                        f"is the chains of hdl.compiler.io_stripe_program")
    if spec.in_switch and not trees:
        raise FredError(f"{spec.name} multicasts (reduces) in its switches: its striped I/O request is "
                        f"{spec.io_controllers} trees sharing every NPU output at once "
                        f"(hdl.compiler.io_stripe_shared.shared_io_program); the striped chains are Fred-A/C's")
    if spec.io_controllers < 1:
        raise FredError(f"{op} striped over the I/O controllers needs controllers; {spec.name} has none "
                        f"(io_controllers = 0)")
    if isinstance(size_flits, bool) or not isinstance(size_flits, int) or size_flits < 1:
        raise FredError(f"size must be a positive whole number of flits, got {size_flits!r}")
    if size_flits % spec.io_controllers:
        raise FredError(f"{size_flits} flits per NPU do not split into {spec.io_controllers} whole "
                        f"stripes (one per controller); use a multiple of {spec.io_controllers}")
    members = tuple(range(spec.npus)) if group is None else tuple(sorted(set(group)))
    if len(members) < 2 or any(not 0 <= r < spec.npus for r in members):
        raise FredError(f"the striped I/O group must be at least 2 NPUs of 0..{spec.npus - 1}, "
                        f"got {list(group)}")
    return members


def io_stripe_program(spec: FabricSpec, op: str, size_flits: int, *, group=None,
                      seed: int = 0) -> IoStripeProgram:
    """The steps of ``op`` (``io-broadcast`` or ``io-reduce``) of ``size_flits`` per NPU over
    ``group`` (default: every NPU) from (into) all ``spec.io_controllers`` controllers at once,
    each a stripe (module docstring); data weights from ``seed`` as the fabric program's
    (:func:`~hdl.contracts.npu_engine.rank_weights` of each endpoint). FredError, naming what is
    wrong, for an in-switch fabric (Fred-B/D), no controllers, a size that is not a whole number
    of stripes, or a bad group."""
    members = _check(spec, op, size_flits, group)
    stripe = size_flits // spec.io_controllers
    weights = [rank_weights(e, seed) for e in range(spec.endpoints)]
    steps: list[dict[int, StripeStep]] = [{} for _ in range(spec.endpoints)]
    chains = []
    for k in range(spec.io_controllers):
        io = spec.npus + k
        order = algorithms.io_chain_order(members, spec.l1_of, spec.l1_of(io), k)
        chains.append(order)
        org = k * stripe
        if op == "io-broadcast":
            _broadcast_steps(steps, io, order, weights[io], k, org, stripe, weights)
        else:
            _reduce_steps(steps, io, tuple(reversed(order)), k, org, stripe, weights)
    return IoStripeProgram(op, size_flits, stripe, tuple(chains), steps)


def _broadcast_steps(steps, io, order, memory, k, org, flits, weights) -> None:
    """Controller ``io`` -> order[0] -> order[1] -> ...: everyone checks the memory's data."""
    w, h = memory
    steps[io][k] = StripeStep(io, k, None, order[0], False, 0, 0, w, h, org, flits)
    path = (io,) + tuple(order)
    for x, r in enumerate(order):
        dest = order[x + 1] if x + 1 < len(order) else None
        steps[r][k] = StripeStep(r, k, path[x], dest, False, w, h, *weights[r], org, flits)


def _reduce_steps(steps, io, order, k, org, flits, weights) -> None:
    """order[0] -> order[1] -> ... -> controller ``io``: each member adds its own data to the
    sum of those before it; the controller checks the sum of all."""
    for x, r in enumerate(order):
        source = order[x - 1] if x else None
        dest = order[x + 1] if x + 1 < len(order) else io
        wr, hr = _sum_weights(weights[q] for q in order[:x])
        steps[r][k] = StripeStep(r, k, source, dest, x > 0, wr, hr, *weights[r], org, flits)
    wr, hr = _sum_weights(weights[q] for q in order)
    steps[io][k] = StripeStep(io, k, order[-1], None, False, wr, hr, 0, 0, org, flits)


def endpoint_pair_flits(program: IoStripeProgram) -> dict[tuple[int, int], int]:
    """Flits sent from endpoint a to endpoint b, ``{(a, b): flits}``, over every stripe."""
    pairs: dict[tuple[int, int], int] = {}
    for by_stripe in program.steps:
        for step in by_stripe.values():
            if step.dest is not None:
                key = (step.endpoint, step.dest)
                pairs[key] = pairs.get(key, 0) + step.flits
    return pairs


def endpoint_totals(program: IoStripeProgram) -> list[dict]:
    """Per endpoint: flits it sends and receives, the endpoints it receives from and sends to
    (``sources`` / ``dests``, sorted), and the stripes it starts (sends without receiving)."""
    out = []
    for by_stripe in program.steps:
        steps = by_stripe.values()
        out.append({"send": sum(s.flits for s in steps if s.dest is not None),
                    "recv": sum(s.flits for s in steps if s.source is not None),
                    "sources": sorted({s.source for s in steps if s.source is not None}),
                    "dests": sorted({s.dest for s in steps if s.dest is not None}),
                    "starts": sorted(s.stripe for s in steps if s.source is None and s.dest is not None)})
    return out


def receiver_entries(program: IoStripeProgram, endpoint: int) -> list[dict]:
    """The stripes endpoint ``endpoint`` receives, as :func:`hdl.contracts.io_stripes.stripe_receiver_writes`
    entries (``stripe``, ``org``, ``flits``, ``wr``, ``hr``)."""
    return [{"stripe": s.stripe, "org": s.org, "flits": s.flits, "wr": s.wr, "hr": s.hr}
            for s in program.steps[endpoint].values() if s.source is not None]


def npu_own(program: IoStripeProgram, endpoint: int) -> dict:
    """NPU ``endpoint``'s own part (:data:`hdl.contracts.io_stripes.NPU_OWN_REGS`): in
    ``io-reduce`` its data weights, ``add`` (it adds its data to every stripe it forwards) and
    the stripe it starts from its own data (at most one: the last member of a chain in the
    broadcast's order); in ``io-broadcast`` nothing (every register 0)."""
    steps = program.steps[endpoint].values()
    starts = [s for s in steps if s.source is None and s.dest is not None]
    if program.op != "io-reduce" or not steps:
        return {}
    if len(starts) > 1:
        raise FredError(f"endpoint {endpoint} starts {len(starts)} stripes; the stripe NPU starts at most one")
    first = next(iter(steps))
    own = {"ws": first.ws, "hs": first.hs, "add": int(any(s.adds for s in steps))}
    if starts:
        own.update(start=starts[0].stripe + 1, start_org=starts[0].org, start_flits=starts[0].flits)
    return own
