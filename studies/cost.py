"""Silicon area and power of a FRED fabric design (docs/dse.md; ``fred dse``).

A :class:`FabricDesign` is a two-level FRED tree on the platform's NPUs: ``npus_per_l1`` NPUs
per L1 switch, L1-L2 bandwidth per L1 as a fraction of the attached NPUs' bandwidth,
in-switch collectives on or off, the switch chiplets' size (``chiplet_ports`` P) and middle
subnetworks (``middle`` m), and the number of I/O controllers. :func:`fabric_cost` prices it
with :class:`CostModel` (``configs/cost.toml``, every coefficient with its source):

* **ports** of a logical switch, in units of one NPU link: its NPUs, its I/O controllers
  (round-robin over the L1s, one port each) and its uplink (L1-L2 bandwidth / NPU link
  bandwidth, rounded up); the L2 has every L1's uplink ports.
* **chiplets**: a logical switch of N ports that fits one P-port chiplet (N <= P) is one
  chiplet, traversed once; a larger one is a folded Clos of chiplets (leaves with P/2 ports
  down and P/2 up, spines of P ports): ceil(N / (P/2)) + ceil(N / P) chiplets, a path crosses
  3, and every external port's bandwidth crosses 3 chiplet ports (leaf down, leaf up, spine).
* **I/O area**: the chiplet ports' bandwidth (send + receive) needs shoreline at the paper's
  107.4 GBps/mm; the region behind it has a depth derived from the paper's 25,195 mm^2 on its
  Fred-D design (the cost file's ``[reference]``).
* **logic area**: the switch datapath scales with bandwidth: the RTL's Fred_m(P) moves
  ``lanes`` x element bytes per cycle per port at the model clock; a port of bandwidth B needs
  B / that many copies of its share of the switch's cells (the cells of Fred_m(P) over P, all
  lanes; the characterization's synthesized or composed Fred_m(P)), converted to gate equivalents by cell
  type, scaled by the measured ratio of standard-cell GE to those GE (OSU 0.35 um, docs/asic.md)
  and to mm^2 at the 15 nm NAND2 area and placement utilisation.
* **power**: the paper's 179.35 W for its Fred-D, scaled by chiplet-port bandwidth (the
  fabric is I/O-dominated and the paper gives no other breakdown).

:func:`design_switch_timing` gives the switch timing a design runs at: the characterization's
measured summary of Fred_m(P) (fp16), with the first-flit latency multiplied by the chiplets a
path crosses in the larger logical switch (one SwitchTiming serves both levels in the model).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from typing import Annotated

from pydantic import Field

from hdl.contracts.characterization import read_characterization
from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import (InputModel, NonNegativeInt, NonNegativeNumber, PositiveInt, PositiveNumber,
                                        UnitFraction, validate_input)
from sysmodel.model_cache import current
from sysmodel.platform import GB, Platform
from sysmodel.switch_timing import SwitchTiming
from sysmodel.toml_file import read_config_toml

__all__ = ["FabricDesign", "CostModel", "load_cost_model", "fabric_cost", "design_switch_timing",
           "switch_ports", "chiplet_layout"]


@dataclass(frozen=True)
class FabricDesign:
    """One FRED fabric design point (see the module docstring)."""

    npus_per_l1: int
    l1_l2_fraction: float
    in_switch: bool
    middle: int
    chiplet_ports: int
    io_controllers: int

    def __post_init__(self):
        for name in ("npus_per_l1", "middle", "chiplet_ports"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise FredError(f"design {name} must be a positive integer, got {value!r}")
        if isinstance(self.io_controllers, bool) or not isinstance(self.io_controllers, int) \
                or self.io_controllers < 0:
            raise FredError(f"design io_controllers must be an integer >= 0, got {self.io_controllers!r}")
        if not isinstance(self.l1_l2_fraction, (int, float)) or isinstance(self.l1_l2_fraction, bool) \
                or not 0 < self.l1_l2_fraction <= 64:
            raise FredError(f"design l1_l2_fraction must be in (0, 64], got {self.l1_l2_fraction!r}")
        if not isinstance(self.in_switch, bool):
            raise FredError(f"design in_switch must be true or false, got {self.in_switch!r}")
        if self.chiplet_ports < 2 or self.chiplet_ports & (self.chiplet_ports - 1):
            raise FredError(f"design chiplet_ports must be a power of two >= 2, got {self.chiplet_ports}")

    @property
    def name(self) -> str:
        return (f"L1x{self.npus_per_l1}-up{self.l1_l2_fraction:g}-{'isw' if self.in_switch else 'noisw'}"
                f"-m{self.middle}-P{self.chiplet_ports}-io{self.io_controllers}")

    def l1_l2_gbps(self, platform: Platform) -> float:
        """L1-L2 bandwidth per L1 and direction: the fraction of the attached NPUs' bandwidth."""
        return self.l1_l2_fraction * self.npus_per_l1 * platform.npu_send_gbps

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CostModel:
    """The coefficients of ``configs/cost.toml`` (each documented there with its source)."""

    shoreline_gbps_per_mm: float
    count_both_directions: bool
    nand2_um2: float
    utilization: float
    gate_equivalents: dict
    paper_total_w: float
    paper_total_mm2: float
    reference: FabricDesign
    source: str
    name: str = "custom"
    #: gate equivalents of a standard-cell netlist per gate equivalent of the ratios above
    #: (measured by ``make asic``, docs/asic.md); 1.0 prices the generic cells by the ratios alone
    asic_per_generic_ge: float = 1.0
    #: ``[network]``: ``{"npu_cost": x, "gbps_cost": {kind: cost per GBps per NPU}}`` or None
    network: dict | None = None

    def gate_equivalents_of(self, cells_by_type: dict) -> float:
        """Gate equivalents of a yosys cell count by type (flip-flops by the ``$_DFF_`` entry)."""
        total = 0.0
        for cell, count in cells_by_type.items():
            if cell == "$scopeinfo":
                continue      # yosys bookkeeping, no hardware
            if "DFF" in cell:
                ge = self.gate_equivalents.get("$_DFF_", 1.0)
            else:
                ge = self.gate_equivalents.get(cell, 1.0)
            total += ge * count
        return total


# -- the cost file's schema (pydantic; configs/cost.toml) ---------------------------------------
class _Io(InputModel):
    shoreline_gbps_per_mm: PositiveNumber
    count_both_directions: bool


class _Logic(InputModel):
    nand2_um2: PositiveNumber
    utilization: UnitFraction
    asic_per_generic_ge: PositiveNumber = 1.0
    gate_equivalents: dict[str, PositiveNumber]


class _Power(InputModel):
    paper_total_w: PositiveNumber


class _Area(InputModel):
    paper_total_mm2: PositiveNumber


class _Reference(InputModel):
    """A :class:`FabricDesign` (whose own check adds: chiplet_ports a power of two)."""

    npus_per_l1: PositiveInt
    l1_l2_fraction: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)]
    in_switch: bool
    middle: PositiveInt
    chiplet_ports: PositiveInt
    io_controllers: NonNegativeInt


class _Network(InputModel):
    """The cluster network's cost per NPU (studies/bandwidth_optimizer.py)."""

    npu_cost: NonNegativeNumber
    gbps_cost: dict[str, NonNegativeNumber]


class _CostFile(InputModel):
    name: str = "custom"
    description: str = ""
    io: _Io
    logic: _Logic
    power: _Power
    area: _Area
    reference: _Reference
    network: _Network | None = None


def load_cost_model(path: str | Path | None = None) -> CostModel:
    """The cost model in ``path`` (default: the shipped ``configs/cost.toml``); unknown or
    missing keys are errors naming them."""
    data, source = read_config_toml(path, shipped="cost.toml", what="cost model")
    doc = validate_input(_CostFile, data, source)
    try:
        reference = FabricDesign(**doc.reference.model_dump())
    except FredError as exc:
        raise FredError(f"{source}: [reference]: {exc}") from None
    return CostModel(shoreline_gbps_per_mm=doc.io.shoreline_gbps_per_mm,
                     count_both_directions=doc.io.count_both_directions,
                     nand2_um2=doc.logic.nand2_um2, utilization=doc.logic.utilization,
                     gate_equivalents=dict(doc.logic.gate_equivalents),
                     asic_per_generic_ge=doc.logic.asic_per_generic_ge,
                     paper_total_w=doc.power.paper_total_w,
                     paper_total_mm2=doc.area.paper_total_mm2,
                     reference=reference, source=source, name=doc.name,
                     network=doc.network.model_dump() if doc.network else None)


# -- structure ------------------------------------------------------------------------------
def switch_ports(design: FabricDesign, platform: Platform) -> list[dict]:
    """The logical switches of ``design`` on ``platform``: per switch its name, ports (in NPU
    link units) and the bandwidth of those ports (GBps per direction)."""
    npus = platform.npus
    l1s = math.ceil(npus / design.npus_per_l1)
    link = platform.npu_send_gbps
    up_ports = math.ceil(design.l1_l2_gbps(platform) / link - 1e-9) if l1s > 1 else 0
    io_per_l1 = [len(range(j, design.io_controllers, l1s)) for j in range(l1s)]
    out = []
    for j in range(l1s):
        members = min(design.npus_per_l1, npus - j * design.npus_per_l1)
        bw = members * link + io_per_l1[j] * platform.io_gbps + (design.l1_l2_gbps(platform) if l1s > 1 else 0)
        out.append({"switch": f"l1.{j}", "ports": members + io_per_l1[j] + up_ports, "gbps": bw})
    if l1s > 1:
        out.append({"switch": "l2", "ports": l1s * up_ports, "gbps": l1s * design.l1_l2_gbps(platform)})
    return out


def chiplet_layout(ports: int, chiplet_ports: int) -> tuple[int, int, int]:
    """(chiplets, chiplets a path crosses, chiplet ports each external port's bandwidth
    crosses) of a logical switch of ``ports`` ports built from ``chiplet_ports``-port chiplets
    (one chiplet, or a folded Clos of leaves and spines; see the module docstring)."""
    if ports <= chiplet_ports:
        return 1, 1, 1
    half = chiplet_ports // 2
    return math.ceil(ports / half) + math.ceil(ports / chiplet_ports), 3, 3


# -- characterization -----------------------------------------------------------------------
def _characterization(platform: Platform):
    source = platform.switch.source
    if not Path(source).is_file():
        raise FredError(f"the design-space sweep reads switch timing and cells per chiplet size "
                        f"from the platform's characterization file, but its switch timing came "
                        f"from {source!r}, which is not a file")
    # a design-space sweep asks for it once per design and cost (hundreds of times per
    # command): the 0.3 MB file is read and validated once while it is unchanged on disk
    path = Path(source).resolve()
    stat = path.stat()
    return current().characterizations.get_or_make((source, str(path), stat.st_mtime_ns, stat.st_size),
                                                   lambda: read_characterization(source))


def _summary(document: dict, ports: int, middle: int, source: str) -> dict:
    for s in document.get("summaries", []):
        if s.get("ports") == ports and s.get("middle") == middle and s.get("dtype") == "fp16":
            return s
    have = sorted({(s.get("ports"), s.get("middle")) for s in document.get("summaries", [])})
    raise FredError(f"{source}: no measured summary of Fred_{middle}({ports}) fp16; measured: "
                    f"{', '.join(f'Fred_{m}({p})' for p, m in have) or 'none'}")


def design_switch_timing(design: FabricDesign, platform: Platform) -> SwitchTiming:
    """The switch timing of ``design``'s chiplets (the measured Fred_m(P) fp16 summary), with
    the first-flit latency of the chiplets a path crosses in the larger logical switch.

    A design without in-switch collectives on a platform whose switches route unicasts online
    (``[fred] unicast_routing = "online"``, the paper's) stores no phase: nothing of it reads a
    phase switch, a select or a configuration load, so those figures are left unset (None; a
    read is an error, :class:`~sysmodel.switch_timing.SwitchTiming`) and the source names the
    chiplet without its ``m``. Two such designs that differ only in ``m`` (Fred_2(P) and
    Fred_3(P), whose first-flit latency and throughput the characterization gives equal) are
    then one platform value, and their iterations are computed once (``fred dse``'s grid:
    docs/sysmodel.md, Speed, thirty-fourth increment)."""
    char = _characterization(platform)
    s = _summary(char.document, design.chiplet_ports, design.middle, char.source)
    hops = max(chiplet_layout(sw["ports"], design.chiplet_ports)[1] for sw in switch_ports(design, platform))
    timing = replace(platform.switch,
                     first_flit_latency_cycles=float(s["first_flit_latency_cycles"]) * hops,
                     throughput_flits_per_cycle_per_port=float(s["throughput_flits_per_cycle_per_port"]),
                     phase_switch_cycles=float(s["phase_switch_cycles"]),
                     config_load_cycles=float(s["config_load_cycles"]),
                     source=f"{char.source} (summary Fred_{design.middle}({design.chiplet_ports}) fp16, "
                            f"{hops} chiplet(s) per switch traversal)",
                     shipped=platform.switch.shipped)
    if design.in_switch or platform.unicast_routing != "online":
        return timing
    return replace(timing, phase_switch_cycles=None, config_load_cycles=None, select_copy_cycles=None,
                   source=f"{char.source} (summary Fred_m({design.chiplet_ports}) fp16 of the design's m, "
                          f"{hops} chiplet(s) per switch traversal; no phase figures: no in-switch collectives)")


def _switch_cells(document: dict, ports: int, middle: int, cost: CostModel, source: str) -> tuple[float, int, str]:
    """(gate equivalents, lanes, where from) of Fred_m(P): the synthesized switch when the
    characterization has it, else the composition of its measured microswitches."""
    entries = [c for c in document.get("cost", []) if c.get("dtype") == "fp16"]
    for c in entries:
        if c.get("kind") == "switch" and c.get("ports") == ports and c.get("middle") == middle \
                and c.get("generic_cells_by_type"):
            return cost.gate_equivalents_of(c["generic_cells_by_type"]), int(c["lanes"]), "synthesized"
    composed = (document.get("cost_composed") or {}).get(f"P{ports}m{middle}")
    measured = [c for c in entries if c.get("generic_cells_by_type")]
    if composed is None or not measured:
        raise FredError(f"{source}: no cell count of Fred_{middle}({ports}) fp16 (neither synthesized "
                        f"nor composed); run fred characterize with that size")
    # the composed estimate gives total cells only: convert with the measured designs' mean GE per cell
    ge = sum(cost.gate_equivalents_of(c["generic_cells_by_type"]) for c in measured)
    cells = sum(sum(n for t, n in c["generic_cells_by_type"].items() if t != "$scopeinfo") for c in measured)
    return composed["generic_cells"] * ge / cells, int(measured[0]["lanes"]), "composed"


# -- cost -----------------------------------------------------------------------------------
def _raw_cost(design: FabricDesign, platform: Platform, cost: CostModel) -> dict:
    char = _characterization(platform)
    ge, lanes, origin = _switch_cells(char.document, design.chiplet_ports, design.middle, cost, char.source)
    ge *= cost.asic_per_generic_ge      # the generic cells' GE as a standard-cell library realises them
    # one copy of a port's datapath moves all its fp16 lanes per cycle; a port of B GBps needs
    # B / copy_gbps copies of the port's share of the switch, GE / P (all lanes of it)
    copy_gbps = lanes * 2 * platform.switch.clock_mhz * 1e6 / GB
    ge_per_port = ge / design.chiplet_ports
    directions = 2 if cost.count_both_directions else 1
    chiplets, port_gbps, logic_ge = 0, 0.0, 0.0
    for sw in switch_ports(design, platform):
        n, _, crossings = chiplet_layout(sw["ports"], design.chiplet_ports)
        chiplets += n
        port_gbps += sw["gbps"] * crossings
        logic_ge += sw["gbps"] * crossings / copy_gbps * ge_per_port
    shoreline_mm = directions * port_gbps / cost.shoreline_gbps_per_mm
    logic_mm2 = logic_ge * cost.nand2_um2 * 1e-6 / cost.utilization
    return {"chiplets": chiplets, "port_gbps": port_gbps, "shoreline_mm": shoreline_mm,
            "logic_mm2": logic_mm2, "cells_from": origin}


def fabric_cost(design: FabricDesign, platform: Platform, cost: CostModel) -> dict:
    """Area (mm^2: logic, I/O, total), power (W), chiplets and shoreline of ``design``."""
    raw = _raw_cost(design, platform, cost)
    ref = _raw_cost(cost.reference, platform, cost)
    depth_mm = (cost.paper_total_mm2 - ref["logic_mm2"]) / ref["shoreline_mm"]
    if depth_mm <= 0:
        raise FredError(f"{cost.source}: the reference design's logic ({ref['logic_mm2']:.0f} mm^2) "
                        f"exceeds the paper's total {cost.paper_total_mm2} mm^2")
    io_mm2 = raw["shoreline_mm"] * depth_mm
    return {"area_mm2": raw["logic_mm2"] + io_mm2, "logic_mm2": raw["logic_mm2"], "io_mm2": io_mm2,
            "power_w": cost.paper_total_w * raw["port_gbps"] / ref["port_gbps"],
            "chiplets": raw["chiplets"], "shoreline_mm": raw["shoreline_mm"],
            "io_depth_mm": depth_mm, "cells_from": raw["cells_from"]}
