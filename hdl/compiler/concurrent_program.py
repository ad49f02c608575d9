"""Concurrent traffic classes on the packet fabric (docs/fabric_rtl.md, "Concurrent traffic
classes"): several requests -- e.g. an MP all-reduce, a DP all-reduce and a PP multicast, each
with its own op, groups and size -- as one program, each class on its own VC.

Each class is compiled alone (:func:`~hdl.compiler.fabric_program.fabric_program`, in-switch
collectives), then the programs are laid side by side: class ``c``'s phases take the slots
after those of the classes before it at every switch (so a collective sits in one slot index
at every switch it crosses, as its header names one slot), a switch a class does not cross
gets an empty phase in its slots, and every endpoint keeps the engine of the class it
belongs to. The classes must use disjoint endpoints: an NPU has one engine and one set of
header registers (``PACKET_REGS``), so it sends one class per run.

Endpoint algorithms (rings and chains: Fred-A/C) store no phase: every class's packets are
online unicasts of the default index (docs/switch.md, "Online unicast routing"), and each
NPU's header names its class's VC, so a switch serves the default index of the highest waiting
VC and a higher class preempts a lower one at packet boundaries (the default index is "a
phase like the others"). Their program is every NPU's engine from its class's program and
no stored phase. Classes of both kinds in one run (an NPU's write into an I/O controller under
an in-switch all-reduce: the scenario dp-under-write) make a fabric built with online routing
*and* stored phases: the in-switch classes take their slots as above, the endpoint classes'
collectives are the program's ``online_collectives`` (their NPUs' headers name the default
index, :func:`hdl.compiler.packet_fabric_program.online_headers`). Such a fabric follows no
phase order (docs/switch.md, "Phase order": ordered switches are built without online
routing), so its in-switch classes may store at most one phase per VC at a switch
(:func:`hdl.compiler.packet_fabric_program.phase_orders` finds none to follow). Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricRequest, FabricSpec

__all__ = ["TrafficClass", "concurrent_program"]

#: The VC of each traffic class (hdl.contracts.packet.VC names). I/O streams share DP's: FRED
#: has four VCs, MP, DP, PP and control (shared spec FRED.md section 2), none for I/O, and the
#: model puts I/O on DP's level (docs/sysmodel.md: "I/O streams share DP's level").
CLASS_VC = {"mp": "MP", "pp": "PP", "dp": "DP", "io": "DP"}


@dataclass(frozen=True)
class TrafficClass:
    """One class of a concurrent run: ``name`` (for reports), ``kind`` (``mp``, ``pp``, ``dp``
    or ``io``: its VC and the model's priority level), ``request`` (its
    :class:`~hdl.contracts.fabric.FabricRequest`), ``delay`` (cycles after the start before
    its NPUs send), ``algorithm`` (as :func:`~hdl.compiler.fabric_program.fabric_program`;
    None: the fabric's default)."""

    name: str
    kind: str
    request: FabricRequest
    delay: int = 0
    algorithm: str | None = None

    def __post_init__(self):
        if self.kind not in CLASS_VC:
            raise FredError(f"traffic class {self.name}: kind must be one of "
                            f"{', '.join(CLASS_VC)}, got {self.kind!r}")
        if not isinstance(self.delay, int) or self.delay < 0:
            raise FredError(f"traffic class {self.name}: delay must be a whole number of cycles "
                            f">= 0, got {self.delay!r}")


def concurrent_program(spec: FabricSpec, classes, *, seed: int = 0,
                       sink_backpressure: float = 0.0):
    """``(program, request, vcs, delays, collective_class)`` of ``classes`` (a sequence of
    :class:`TrafficClass`) run at once on ``spec``'s packet fabric: the merged
    :class:`~hdl.compiler.fabric_program.FabricProgram`, one :class:`FabricRequest` holding
    every class's collectives (class order), and per collective index its VC, its delay and
    its class's index. The program's ``algorithm`` is the classes' algorithms joined by `` + ``
    (``in-switch``; endpoint algorithms alone: online unicasts, no stored phase; both: stored
    phases and ``online_collectives``, module docstring). FredError for classes sharing an
    endpoint, two classes on one VC, or more slots than a switch stores."""
    from hdl.compiler.fabric_program import FabricProgram, fabric_program
    from hdl.contracts.packet import VC
    classes = list(classes)
    if spec.dtype != "int32":
        raise FredError(f"concurrent classes run on int32 data so far; got {spec.dtype}")
    if len(classes) < 2:
        raise FredError(f"a concurrent run needs two or more traffic classes, got {len(classes)}")
    vc_of_class = [CLASS_VC[c.kind] for c in classes]
    owner = _owners(classes, vc_of_class)
    programs = [fabric_program(spec, cls.request, algorithm=cls.algorithm, seed=seed,
                               sink_backpressure=sink_backpressure, aligned_slots=True)
                for cls in classes]
    online = [p.algorithm != "in-switch" for p in programs]
    collectives, vcs, delays, collective_class, firsts = [], {}, {}, [], []
    for c, cls in enumerate(classes):
        firsts.append(len(collectives))
        for i, coll in enumerate(cls.request.collectives):
            collectives.append(coll)
            vcs[firsts[c] + i] = int(VC[vc_of_class[c]])
            delays[firsts[c] + i] = cls.delay
            collective_class.append(c)
    # online unicasts store no phase anywhere; in-switch classes take consecutive slots
    stored = [c for c, o in enumerate(online) if not o]
    switches = ([[] for _ in spec.switch_ports] if not stored
                else _side_by_side(spec, [programs[c] for c in stored], [firsts[c] for c in stored]))
    # with stored phases, the endpoint classes' collectives are online unicasts among them
    online_collectives = (frozenset(i for i, c in enumerate(collective_class) if online[c])
                          if stored else frozenset())
    engines = [programs[owner.get(rank, 0)].engines[rank] for rank in range(spec.endpoints)]
    contributors = [programs[owner.get(rank, 0)].contributors[rank] for rank in range(spec.endpoints)]
    algorithm = " + ".join(dict.fromkeys(p.algorithm for p in programs))
    program = FabricProgram(algorithm, spec.switch_ports, switches, engines,
                            sum(e["send_count"] for e in engines),
                            sum(e["recv_count"] for e in engines), contributors,
                            planes=spec.l2_planes, online_collectives=online_collectives)
    label = " + ".join(f"{cls.name} ({cls.request.label}, {cls.request.size_flits} flits"
                       + (f", from cycle {cls.delay})" if cls.delay else ")") for cls in classes)
    request = FabricRequest("concurrent", tuple(collectives),
                            max(cls.request.size_flits for cls in classes), label)
    return program, request, vcs, delays, collective_class


def _side_by_side(spec, programs, firsts):
    """Per switch the slots of the in-switch ``programs`` laid side by side: program ``c``'s
    phases after the earlier programs' at every switch (its collectives renumbered from
    ``firsts[c]``), an empty phase where a switch has fewer; FredError for more slots than a
    switch stores."""
    from hdl.compiler.fabric_program import SwitchPhase, default_phases, empty_phase
    from hdl.compiler.router import Router
    switches = [[] for _ in spec.switch_ports]
    for program, first in zip(programs, firsts):
        base = max(len(p) for p in switches)
        for s, phases in enumerate(program.switches):
            while len(switches[s]) < base:     # a slot this switch has no phase in: empty
                switches[s].append(empty_phase(Router(ports=spec.switch_ports[s], middle=spec.middle)))
            switches[s] += [SwitchPhase(p.flows, p.config, p.input_flits,
                                        tuple(first + i for i in p.collectives), p.port_flits)
                            for p in phases]
    if max(len(p) for p in switches) > default_phases():
        raise FredError(f"the classes need {max(len(p) for p in switches)} slots on a switch; "
                        f"the RTL stores {default_phases()}")
    return switches


def _owners(classes, vc_of_class) -> dict[int, int]:
    """``{endpoint: its class's index}``; FredError for two classes on one VC (but an I/O
    stream on DP's: the switches serve their phases in the programmed order, docs/switch.md
    "Phase order", or, online, in their one default phase) or sharing an endpoint."""
    for vc in set(vc_of_class):
        named = [c.name for c, v in zip(classes, vc_of_class) if v == vc]
        kinds = sorted(c.kind for c, v in zip(classes, vc_of_class) if v == vc)
        if len(named) > 1 and kinds != ["dp", "io"]:
            raise FredError(f"classes {', '.join(named)} would share VC {vc}: a switch serves one "
                            f"phase per VC at a time (only an I/O stream shares DP's)")
    owner: dict[int, int] = {}
    for c, cls in enumerate(classes):
        for coll in cls.request.collectives:
            for rank in coll.ranks:
                if rank in owner:
                    raise FredError(f"endpoint {rank} is in classes {classes[owner[rank]].name} and "
                                    f"{cls.name}: an endpoint has one engine and one header per run")
                owner[rank] = c
    return owner


