"""A fabric case run on the packet fabric (``fred fabric-sim --switch packet``;
docs/fabric_rtl.md, "Packet fabric"): the same request and model estimate as
:mod:`studies.fabric_case`, the RTL side on ``fred_packet_fabric`` under Verilator."""

from __future__ import annotations

from dataclasses import replace

from hdl.contracts.errors import FredError

__all__ = ["run_packet_case", "build_packet_case", "check_packet_program", "PACKET_SUBSTITUTES"]

#: Algorithms the model may choose that the packet fabric does not run, and the one both sides
#: run instead: the hierarchical all-reduce's three stages send to three different endpoints,
#: the engines' header registers name one per run (hdl/compiler/packet_fabric_program.py).
PACKET_SUBSTITUTES = {"hierarchical": "ring"}


def build_packet_case(**request):
    """:func:`studies.fabric_case.build_case` on packet switches (``request``: its keywords but
    ``switch``), with the model's own algorithm unless the packet fabric does not run it
    (:data:`PACKET_SUBSTITUTES`): then both sides run the substitute, so the comparison stays
    one algorithm against itself."""
    from studies.fabric_case import build_case
    case = build_case(switch="packet", **request)
    substitute = PACKET_SUBSTITUTES.get(case.estimate.algorithm)
    if substitute and request.get("algorithm") is None:
        case = build_case(switch="packet", **{**request, "algorithm": substitute})
    check_packet_program(case)
    return case


def check_packet_program(case) -> None:
    """FredError, before anything is built, if the packet fabric cannot run ``case``'s program
    (the header registers: phases a switch can order for in-switch collectives, one-stage
    programs for endpoint algorithms; hdl/compiler/packet_fabric_program.py)."""
    from hdl.compiler.fabric_program import default_phases, fabric_program
    from hdl.compiler.packet_fabric_program import online_headers, packet_headers, runs_online
    from hdl.designs.fabric.packet_fabric_top import packet_format
    program = fabric_program(case.spec, case.request, algorithm=case.estimate.algorithm,
                             aligned_slots=True)
    if runs_online(program):
        fmt = packet_format(default_phases(), dest_ports=max(case.spec.switch_ports))
        online_headers(program, case.request, fmt)
    else:
        packet_headers(program, case.request, packet_format(default_phases()))


def run_packet_case(case, *, seed: int = 0, sink_backpressure: float = 0.0,
                    watchdog_cycles: int | None = None, pgo: bool = False, simulator: str = "cocotb"):
    """``case`` (:class:`studies.fabric_case.FabricCase`) with its RTL side run on the packet
    fabric, with the algorithm the model timed; errors in the received data, or a request the
    packet fabric does not run yet (the hierarchical all-reduce), are a :class:`FredError`.
    ``pgo``: the profile-guided build; ``simulator``: one model (``cocotb``) or the lock-step
    simulator's two parts (``lockstep``) (``cocotb_tests.fabric.packet_fabric_sim``)."""
    from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric
    # the algorithm the model timed: in-switch (stored phases selected by the headers) or an
    # endpoint algorithm (online-routed unicasts; one-stage programs: ring and chain)
    rtl = run_packet_fabric(case.spec, case.request, seed=seed, sink_backpressure=sink_backpressure,
                            watchdog_cycles=watchdog_cycles, algorithm=case.estimate.algorithm,
                            pgo=pgo, simulator=simulator)
    case = replace(case, rtl=rtl, options={**case.options, "seed": seed, "switch": "packet",
                                           "sink_backpressure": sink_backpressure,
                                           "simulator": rtl.simulator})
    if rtl.errors:
        raise FredError(f"{case.spec.name} {case.request.label} on the packet fabric: "
                        f"{len(rtl.errors)} error(s): {'; '.join(rtl.errors[:5])}")
    return case
