"""What the circuit FRED fabric's program loaders hold for several collectives per NPU
(docs/fabric_iteration.md, "Several collectives per NPU on the circuit FRED fabric"): per NPU
its engine's program of each collective, per switch its phase sequencer's counts of each."""

from __future__ import annotations

from hdl.compiler.fabric_program import default_phases, switch_label
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricSpec
from hdl.contracts.npu_engine import ENGINE_REGS, engine_writes
from hdl.contracts.trace_program import loader_entries

__all__ = ["check_shared_switch_phases", "fred_loader_entries"]


def check_shared_switch_phases(spec: FabricSpec, programs: list) -> None:
    """Every collective's switch phases (``programs``: the
    :class:`hdl.compiler.fabric_program.FabricProgram` of each, in order) configured as the
    first's: the switches hold one set of configured phases for the whole iteration (loaded
    once; only the phase sequencers' counts change per collective). A FredError names the first
    switch and collective that would need other phases."""
    first = programs[0]
    for k, program in enumerate(programs[1:], start=1):
        for s, (mine, theirs) in enumerate(zip(program.switches, first.switches)):
            if [p.flows for p in mine] != [p.flows for p in theirs]:
                raise FredError(
                    f"collective {k} ({program.algorithm}) needs other phases on switch "
                    f"{switch_label(spec.l1_count, spec.l2_planes, s)} than collective 0 "
                    f"({first.algorithm}): {len(mine)} phase(s) of flows "
                    f"{[list(map(str, p.flows)) for p in mine]} against {len(theirs)}; the circuit "
                    f"fabric's switches hold one configuration set per iteration (loading another "
                    f"between collectives is not built)")


def fred_loader_entries(spec: FabricSpec, programs: list) -> tuple[dict[int, list], dict[int, list]]:
    """(per rank, its engine's program-loader entries; per switch, its phase sequencer's) for
    ``programs`` in order (:func:`hdl.contracts.trace_program.loader_entries`: only the writes
    that change a register; the engine's ``stages`` deferred to the collective's node, as on
    the mesh). The switches' configurations are collective 0's (:func:`check_shared_switch_phases`)."""
    from hdl.designs.fabric.phase_sequencer import sequencer_registers
    check_shared_switch_phases(spec, programs)
    stages = frozenset({ENGINE_REGS.index("stages")})
    ranks = {rank: loader_entries([{0: engine_writes(p.engines[rank])} for p in programs], 1, deferred=stages)
             for rank in range(spec.npus)}
    switches = {s: loader_entries([{0: sequencer_registers(default_phases(), [
        (ph.input_flits, ph.port_flits, ph.port_mask) for ph in p.switches[s]])} for p in programs], 1)
        for s in range(len(spec.switch_ports))}
    return ranks, switches
