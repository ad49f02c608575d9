"""What the circuit FRED fabric's loaders hold for several collectives per NPU
(docs/fabric_iteration.md, "Several collectives per NPU on the circuit FRED fabric"): per switch
the configured phases of every distinct algorithm, side by side in its slots (loaded once), and
per collective its phase sequencer's counts and first slot; per NPU its engine's program of
each collective."""

from __future__ import annotations

from hdl.compiler.fabric_program import default_phases, switch_label
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.npu_engine import ENGINE_REGS, engine_writes
from hdl.contracts.trace_program import SLOT_BASE, loader_entries

__all__ = ["switch_slots", "fred_configuration", "fred_loader_entries", "phases_key"]


def phases_key(phases) -> tuple:
    """A hashable key of one switch's ``phases``: each phase's flows and its encoded
    configuration words (equal keys load the same configuration words)."""
    return tuple((p.flows, tuple(p.config.encode(32))) for p in phases)


def switch_slots(spec: FabricSpec, programs: list) -> list[tuple[dict, list[int]]]:
    """Per switch: (its distinct phase lists -> first slot, in order of first use; each
    collective's first slot). A switch holds ``default_phases()`` configured phases; the
    distinct phase lists of the iteration's collectives (``programs``: the
    :class:`hdl.compiler.fabric_program.FabricProgram` of each, in order; one per algorithm and
    group) must fit them side by side, or a FredError names the switch and what it would need."""
    out = []
    for s in range(len(spec.switch_ports)):
        slots: dict = {}
        bases = []
        used = 0
        for k, program in enumerate(programs):
            key = phases_key(program.switches[s])
            if key not in slots:
                slots[key] = used
                used += len(key)
                if used > default_phases():
                    raise FredError(
                        f"switch {switch_label(spec.l1_count, spec.l2_planes, s)} would hold {used} "
                        f"configured phases for the iteration's {len(slots)} distinct algorithm(s) "
                        f"(collective {k}: {program.algorithm}, {len(key)} phase(s)); it has "
                        f"{default_phases()} slots (loading configurations between collectives is "
                        f"not built)")
            bases.append(slots[key])
        out.append((slots, bases))
    return out


def fred_configuration(spec: FabricSpec, programs: list) -> list[list[int]]:
    """Every switch's configuration words as ``[switch, slot, last, word]`` (the format of
    ``cocotb_tests.fabric.run.load_sequence``): each distinct phase list at its slots."""
    config = []
    for s, (slots, _) in enumerate(switch_slots(spec, programs)):
        for key, base in slots.items():
            for k, (_, words) in enumerate(key):
                config += [[s, base + k, int(i == len(words) - 1), word] for i, word in enumerate(words)]
    return config


def fred_loader_entries(spec: FabricSpec, programs: list, repeats=None) -> tuple[dict[int, list], dict[int, list]]:
    """(per rank, its engine's program-loader entries; per switch, its rerun phase sequencer's)
    for ``programs`` in order (:func:`hdl.contracts.trace_program.loader_entries`: only the
    writes that change a register; the engine's ``stages`` deferred to the collective's node,
    as on the mesh; a switch's collective: its phases' counts and :data:`SLOT_BASE`).
    ``repeats[k]``: the runs of collective k (its trace node's repeat; default 1): an NPU
    reruns its engine without a new program, a switch takes one program per run (the repeats'
    write nothing)."""
    from hdl.designs.fabric.phase_sequencer import sequencer_registers
    repeats = list(repeats) if repeats is not None else [1] * len(programs)
    if len(repeats) != len(programs) or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in repeats):
        raise FredError(f"repeats must be one positive integer per collective ({len(programs)}), got {repeats!r}")
    slots = switch_slots(spec, programs)
    stages = frozenset({ENGINE_REGS.index("stages")})
    ranks = {rank: loader_entries([{0: engine_writes(p.engines[rank])} for p in programs], 1, deferred=stages)
             for rank in range(spec.npus)}
    switches = {s: loader_entries([{0: [(SLOT_BASE, base), *sequencer_registers(default_phases(), [
        (ph.input_flits, ph.port_flits, ph.port_mask) for ph in p.switches[s]])]}
        for p, base, runs in zip(programs, slots[s][1], repeats) for _ in range(runs)], 1)
        for s in range(len(spec.switch_ports))}
    return ranks, switches
