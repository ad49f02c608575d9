"""One switch's tables for the striped I/O trees on Fred-B/D served as shared stored flows
(``PacketSwitch(shared_phase=, flows=)``, docs/switch.md, "Shared stored flows"): the compiler
side of step 2 of docs/fabric_rtl.md's "Fred-B/D, the shared stored flows".

Pure Python. From :func:`hdl.compiler.io_stripe_trees.stripe_tree_flows`: each distinct flow of
the switch gets a slot (its configuration, routed alone), the flow-port table its entries, and
each stripe (the header's flow id) the slot of the tree it takes there; the shared phase is the
slot after them, or one named slot after them all, the same at every switch of a fabric
(:func:`shared_io_program`, :func:`fabric_shared_tables`: the fabric side, every switch's
tables and every endpoint's part, for ``PacketFabricTop(shared_flows=)``)."""

from __future__ import annotations

from dataclasses import dataclass

from hdl.compiler import Router
from hdl.compiler.fabric_program import switch_label
from hdl.compiler.io_stripe_program import IoStripeProgram, StripeStep, _check
from hdl.compiler.io_stripe_trees import stripe_tree_flows
from hdl.compiler.packet_fabric_program import slot_entries
from hdl.contracts.encoding import SwitchConfig
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import SWITCH_PHASES, FabricSpec
from hdl.contracts.npu_engine import rank_weights
from hdl.contracts.packet import MAX_PHASE_BITS, phase_field_bits

__all__ = ["SharedTables", "shared_stripe_tables", "fabric_shared_phases", "fabric_shared_tables", "shared_io_program"]


@dataclass(frozen=True)
class SharedTables:
    """What the host writes into one switch for the shared striped flows.

    Members: ``configs``: slot k's configuration (the k-th distinct flow routed alone);
    ``flow_ports``: the flow-port table's ``(slot, input, partners, outputs)`` entries;
    ``stripe_slots``: ``{stripe: slot}`` (the shared table: flow id = stripe); ``shared_phase``:
    the header phase of the shared flows, ``len(configs)``; ``phases``: the slots the switch
    needs (``shared_phase + 1``); ``inputs``: ``{input port: stripes in the order they arrive
    there}`` (the stripes of the flows it is an input of, in stripe order)."""

    configs: tuple[SwitchConfig, ...]
    flow_ports: tuple[tuple[int, int, int, int], ...]
    stripe_slots: dict
    shared_phase: int
    phases: int
    inputs: dict


def shared_stripe_tables(spec: FabricSpec, op: str, switch: int, *,
                         phases: int = SWITCH_PHASES + 1, shared_phase: int | None = None) -> SharedTables:
    """The tables of switch ``switch`` (index as :func:`stripe_tree_flows`) for ``op``
    (io-broadcast or io-reduce) striped over ``spec.io_controllers``. ``phases``: the slots the
    switch stores, one more than the distinct flows (the shared phase's index); ``shared_phase``
    (default: the slot after the flows'): the header phase of the shared flows, after every
    flow's slot and below ``phases`` (a fabric's switches share one: the last slot). FredError
    naming the switch when it has too few slots, or for anything :func:`stripe_tree_flows`
    refuses."""
    if isinstance(switch, bool) or not isinstance(switch, int) or not 0 <= switch < len(spec.switch_ports):
        raise FredError(f"switch must be in 0..{len(spec.switch_ports) - 1}, got {switch!r}")
    shared = stripe_tree_flows(spec, op, phases=phases - 1)[switch]
    name = switch_label(spec.l1_count, spec.l2_planes, switch)
    if len(shared) + 1 > phases:
        raise FredError(f"switch {name} needs {len(shared)} slots for its striped flows and one "
                        f"for the shared phase; it stores {phases}")
    if shared_phase is not None and not len(shared) <= shared_phase < phases:
        raise FredError(f"switch {name}: the shared phase must be a slot after its {len(shared)} flows' "
                        f"and below {phases}, got {shared_phase!r}")
    router = Router(ports=spec.switch_ports[switch], middle=spec.middle)
    configs, entries, slots, inputs = [], [], {}, {}
    for k, item in enumerate(shared):
        config, status = router.try_one_phase((item.flow,))
        configs.append(config)
        entries += slot_entries(k, (item.flow,), f"switch {name} slot {k}")
        for stripe in item.stripes:
            slots[stripe] = k
        for n in set(item.flow.inputs):
            inputs.setdefault(n, []).extend(item.stripes)
    shared_phase = len(configs) if shared_phase is None else shared_phase
    return SharedTables(configs=tuple(configs), flow_ports=tuple(entries),
                        stripe_slots=dict(sorted(slots.items())), shared_phase=shared_phase,
                        phases=shared_phase + 1,
                        inputs={n: sorted(s) for n, s in sorted(inputs.items())})


def fabric_shared_phases(spec: FabricSpec, op: str, *, phase_bits: int = MAX_PHASE_BITS) -> int:
    """The slots every switch of a fabric serving ``op``'s striped trees as shared stored flows
    stores (``PacketFabricTop(phases=, shared_flows=)``; its header's phase field follows,
    :func:`~hdl.contracts.packet.phase_field_bits`): the most any switch needs, its distinct
    trees and the shared phase after them, and never fewer than the fabric's default
    :data:`~hdl.contracts.fabric.SWITCH_PHASES`, so a fabric whose trees fit the default keeps
    its slots, its 3-bit phase and its Verilog (Fred-B's wafer: 6 needed, 8); Fred-D's wafer
    needs 9 (its L1s 0-2 take 8 trees each: 4 controllers' and one downlink per uplink port),
    a 4-bit phase. ``phase_bits``: the widest phase field the header may have (default
    :data:`~hdl.contracts.packet.MAX_PHASE_BITS`). FredError naming the switch and the count when
    its slots need a wider field, or for anything :func:`stripe_tree_flows` refuses."""
    if isinstance(phase_bits, bool) or not isinstance(phase_bits, int) or not 1 <= phase_bits <= MAX_PHASE_BITS:
        raise FredError(f"phase_bits must be an integer in 1..{MAX_PHASE_BITS}, got {phase_bits!r}")
    flows = stripe_tree_flows(spec, op, phases=1 << MAX_PHASE_BITS)
    needs = [len(shared) + 1 for shared in flows]
    s = max(range(len(needs)), key=needs.__getitem__)
    name = switch_label(spec.l1_count, spec.l2_planes, s)
    what = f"switch {name} ({needs[s] - 1} trees of {spec.name}'s striped {op} and the shared phase)"
    if phase_field_bits(needs[s], where=what) > phase_bits:
        raise FredError(f"{what} needs {needs[s]} slots; a {phase_bits}-bit phase field names {1 << phase_bits}")
    return max(SWITCH_PHASES, needs[s])


def fabric_shared_tables(spec: FabricSpec, op: str, phases: int) -> list[SharedTables]:
    """Every switch's :class:`SharedTables` (the L1s, then the L2 planes) for ``op`` on a fabric
    whose switches store ``phases`` slots and serve the shared flows in the last one
    (``PacketFabricTop(shared_flows=)``): one header phase, ``phases - 1``, at every switch."""
    return [shared_stripe_tables(spec, op, s, phases=phases, shared_phase=phases - 1)
            for s in range(len(spec.switch_ports))]


def shared_io_program(spec: FabricSpec, op: str, size_flits: int, *, seed: int = 0) -> IoStripeProgram:
    """The endpoints' part in ``op`` striped over every controller as Fred-B/D's trees, in the
    form of :func:`hdl.compiler.io_stripe_program.io_stripe_program` (the same data, weights
    and checks; ``chains[k]``: the NPUs of stripe ``k``'s tree, every NPU): ``io-broadcast``,
    controller ``k`` sends stripe ``k`` (its memory, indices ``k S ..``) into its tree and every
    NPU receives it from the controller (the switches replicate it; ``source`` = the
    controller) and checks it; ``io-reduce``, every NPU sends its own data of every stripe
    (``dest`` = the stripe's controller) and controller ``k`` receives stripe ``k``'s sum over
    every NPU (the switches add; ``source`` = the last NPU, standing for the tree). The packets
    carry their stripe as the header's flow id (the shared stored flows, :func:`fabric_shared_tables`).
    FredError, naming what is wrong, for a fabric that does not reduce in its switches, no
    controllers or a size that is not a whole number of stripes."""
    members = _check(spec, op, size_flits, None, trees=True)
    stripe = size_flits // spec.io_controllers
    weights = [rank_weights(e, seed) for e in range(spec.endpoints)]
    steps: list[dict[int, StripeStep]] = [{} for _ in range(spec.endpoints)]
    total = (0, 0)
    for r in members:
        total = tuple((a + b) & 0xFFFFFFFF for a, b in zip(total, weights[r]))
    for k in range(spec.io_controllers):
        io, org = spec.npus + k, k * stripe
        if op == "io-broadcast":
            w, h = weights[io]
            steps[io][k] = StripeStep(io, k, None, members[0], False, 0, 0, w, h, org, stripe)
            for r in members:
                steps[r][k] = StripeStep(r, k, io, None, False, w, h, *weights[r], org, stripe)
        else:
            for r in members:
                steps[r][k] = StripeStep(r, k, None, io, False, 0, 0, *weights[r], org, stripe)
            steps[io][k] = StripeStep(io, k, members[-1], None, False, *total, 0, 0, org, stripe)
    return IoStripeProgram(op, size_flits, stripe, tuple(members for _ in range(spec.io_controllers)), steps)
