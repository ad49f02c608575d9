"""One switch's tables for the striped I/O trees on Fred-B/D served as shared stored flows
(``PacketSwitch(shared_phase=, flows=)``, docs/switch.md, "Shared stored flows"): the compiler
side of step 2 of docs/fabric_rtl.md's "Fred-B/D, the shared stored flows".

Pure Python. From :func:`hdl.compiler.io_stripe_trees.stripe_tree_flows`: each distinct flow of
the switch gets a slot (its configuration, routed alone), the flow-port table its entries, and
each stripe (the header's flow id) the slot of the tree it takes there; the shared phase is the
slot after them."""

from __future__ import annotations

from dataclasses import dataclass

from hdl.compiler import Router
from hdl.compiler.fabric_program import switch_label
from hdl.compiler.io_stripe_trees import stripe_tree_flows
from hdl.compiler.packet_fabric_program import slot_entries
from hdl.contracts.encoding import SwitchConfig
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import SWITCH_PHASES, FabricSpec

__all__ = ["SharedTables", "shared_stripe_tables"]


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
                         phases: int = SWITCH_PHASES + 1) -> SharedTables:
    """The tables of switch ``switch`` (index as :func:`stripe_tree_flows`) for ``op``
    (io-broadcast or io-reduce) striped over ``spec.io_controllers``. ``phases``: the slots the
    switch stores, one more than the distinct flows (the shared phase's index); FredError naming
    the switch when it has too few, or for anything :func:`stripe_tree_flows` refuses."""
    if isinstance(switch, bool) or not isinstance(switch, int) or not 0 <= switch < len(spec.switch_ports):
        raise FredError(f"switch must be in 0..{len(spec.switch_ports) - 1}, got {switch!r}")
    shared = stripe_tree_flows(spec, op, phases=phases - 1)[switch]
    name = switch_label(spec.l1_count, spec.l2_planes, switch)
    if len(shared) + 1 > phases:
        raise FredError(f"switch {name} needs {len(shared)} slots for its striped flows and one "
                        f"for the shared phase; it stores {phases}")
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
    return SharedTables(configs=tuple(configs), flow_ports=tuple(entries),
                        stripe_slots=dict(sorted(slots.items())), shared_phase=len(configs),
                        phases=len(configs) + 1,
                        inputs={n: sorted(s) for n, s in sorted(inputs.items())})
