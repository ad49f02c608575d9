"""The wafer description: NPUs, I/O controllers, links, the mesh baseline and the FRED tree.

Loaded from TOML (:func:`load_platform`); the paper's platform ships as
``configs/paper.toml`` (also installed as package data ``sysmodel/configs/paper.toml``).
Every field is validated on load; an unknown or missing key is an error naming it, so a
typo never silently falls back to a default. Units are in the field names (GBps = 1e9 B/s).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import (InputModel, NonNegativeInt, NonNegativeNumber, PositiveInt,
                                        PositiveNumber, UnitFraction, validate_input)
from sysmodel.compute import ComputeModel, parse_compute
from sysmodel.model_cache import FrozenDict, current, hash_once
from sysmodel.switch_timing import SwitchTiming, load_chiplet_timings, load_switch_timing
from sysmodel.toml_file import read_config_toml

__all__ = ["Platform", "FredVariant", "NetworkSpec", "NpuCompute", "TrainingSpec", "load_platform",
           "default_platform", "FABRICS", "DEFAULT_PLATFORM_NAME"]

DEFAULT_PLATFORM_NAME = "paper.toml"
#: Fabric names accepted everywhere (CLI, evaluation): the mesh baseline and the FRED variants.
FABRICS = ("mesh", "fred-a", "fred-b", "fred-c", "fred-d")

GB = 1e9


@dataclass(frozen=True)
class FredVariant:
    """One FRED variant: L1-L2 bandwidth per L1 (each direction) and in-switch collectives;
    ``in_switch_efficiency``: the fraction of the endpoint algorithms' link rate that in-switch
    flows reach (``[fred.variants.<name>] in_switch_efficiency``; 1.0, the default: the RTL's
    measured line rate; docs/sysmodel.md, "In-switch efficiency")."""

    name: str
    l1_l2_gbps: float
    in_switch: bool
    in_switch_efficiency: float = 1.0


#: ``[fred] unicast_routing`` values (:attr:`Platform.unicast_routing`).
UNICAST_ROUTING = ("online", "configured")
#: ``[fred] phase_select`` values (:attr:`Platform.phase_select`).
PHASE_SELECT = ("start", "header")


@hash_once
@dataclass(frozen=True, kw_only=True)
class NetworkSpec:
    """The part of a :class:`Platform` its networks and collective times depend on (the
    fields of the same names; see :class:`Platform`): the caches of networks and collective
    results key on it, so platforms that differ only in compute or training share them."""

    npus: int
    npu_send_gbps: float
    npu_recv_gbps: float
    io_controllers: int
    io_gbps: float
    link_latency_ns: float
    mesh_rows: int
    mesh_cols: int
    mesh_link_gbps: float
    mesh_flit_bytes: int
    npus_per_l1: int
    switch: SwitchTiming
    variants: FrozenDict
    link_efficiency: float
    l2_switch: SwitchTiming | None
    chiplets: FrozenDict
    l1_l2_latency_ns: float | None
    forward_latency_ns: float
    reduce_forward_latency_ns: float | None
    unicast_routing: str
    phase_select: str
    one_phase_per_switch: bool
    vc_buffer_flits: int


@hash_once
@dataclass(frozen=True, kw_only=True)
class NpuCompute:
    """The part of a :class:`Platform` only compute durations depend on (the NPU's speed:
    ``--compute-scale`` and the calibration change nothing else)."""

    peak_tflops: float
    memory_bandwidth_gbps: float
    compute_efficiency: float
    compute: ComputeModel | None


@hash_once
@dataclass(frozen=True, kw_only=True)
class TrainingSpec:
    """The part of a :class:`Platform` that shapes an iteration's plan and task graph besides
    the network: NPU memory and the training policy."""

    memory_capacity_gb: float
    optimizer_bytes_per_param: int
    iterations: int
    dp_bucket_elements: float
    dp_overlap: bool
    optimizer_step_bytes_per_param: float | None
    pp_overlap: bool
    pp_scatter_gather: bool


#: The section value each Platform field belongs to (``name``, ``description``: a label only).
#: Every field is in exactly one (checked below), so a field added later must be placed, and a
#: cache keyed by a section can never miss a field its result depends on.
_SECTIONS = {"network_spec": NetworkSpec, "npu_compute": NpuCompute, "training_spec": TrainingSpec}
_LABEL_FIELDS = ("name", "description")


@hash_once
@dataclass(frozen=True, kw_only=True)
class Platform:
    """A wafer platform (see ``configs/paper.toml`` for each value's source).

    A frozen, hashable value: equal platforms built separately are equal and hash alike, and
    the model's caches key on it or on its sections (``network_spec``: :class:`NetworkSpec`,
    ``npu_compute``: :class:`NpuCompute`, ``training_spec``: :class:`TrainingSpec`; each the
    fields of the same names, built once with the platform). Its tables (``variants``,
    ``chiplets``) are read-only dicts; change a platform with :meth:`scaled` or
    :func:`dataclasses.replace`.

    Members (all keyword): ``npus``, ``npu_send_gbps``, ``npu_recv_gbps``, ``peak_tflops``,
    ``memory_bandwidth_gbps``, ``memory_capacity_gb``, ``compute_efficiency``,
    ``io_controllers``, ``io_gbps``, ``link_latency_ns`` (``l1_l2_latency_ns``: the L1-L2 links'
    own, optional), ``mesh_rows``, ``mesh_cols``,
    ``mesh_link_gbps``, ``mesh_flit_bytes`` (0: byte-granular), ``npus_per_l1``, ``switch`` (:class:`SwitchTiming`, required: the
    model never assumes switch timings), ``variants`` (name -> :class:`FredVariant`),
    ``optimizer_bytes_per_param``, ``iterations`` (iterations the reported time per iteration
    is the mean over; the first also pays the one-time loads), ``dp_bucket_elements`` and
    ``dp_overlap`` (ZeRO-2 gradient buckets and whether their reduction overlaps the
    backward), ``optimizer_step_bytes_per_param`` (HBM bytes the optimizer step moves per
    parameter; default 2 x optimizer state + 2 x element), ``pp_overlap`` (pipeline sends overlap
    compute; false: the stage waits for them, as Megatron-LM's schedule does),
    ``pp_scatter_gather`` (a stage hand-over is split over the MP ranks, each sending 1/MP to its
    peer, then all-gathered: Megatron-LM's default; false: MP rank 0 multicasts the whole
    activation), ``name``, ``description``; ``compute``
    (:class:`sysmodel.compute.ComputeModel`, shape-dependent GEMM efficiency; None: the flat
    roofline at ``compute_efficiency``), ``link_efficiency`` (fraction of every link's rate
    that collectives reach), ``l2_switch`` and ``chiplets`` (the L2's timing and the chiplet each
    level is built from, ``[fred.chiplets]``; see :meth:`switch_at`). ``mesh_rows = mesh_cols = 0``: no mesh (a platform with only the
    switch tree, e.g. a GPU cluster); ``io_controllers = 0``: no I/O controllers.
    """

    npus: int
    npu_send_gbps: float
    npu_recv_gbps: float
    peak_tflops: float
    memory_bandwidth_gbps: float
    memory_capacity_gb: float
    compute_efficiency: float
    io_controllers: int
    io_gbps: float
    link_latency_ns: float
    mesh_rows: int
    mesh_cols: int
    mesh_link_gbps: float
    npus_per_l1: int
    switch: SwitchTiming
    variants: dict = field(default_factory=dict)
    optimizer_bytes_per_param: int = 12
    iterations: int = 2
    dp_bucket_elements: float = 5e8
    dp_overlap: bool = False
    optimizer_step_bytes_per_param: float | None = None
    pp_overlap: bool = True
    pp_scatter_gather: bool = False
    name: str = "custom"
    description: str = ""
    compute: ComputeModel | None = None
    link_efficiency: float = 1.0
    #: the L2 switch's timing when it differs from the L1's (its chiplet's); None: ``switch``
    #: times every switch
    l2_switch: SwitchTiming | None = None
    #: ``{level: {"ports", "middle", "dtype"}}``: the chiplet each level is built from
    #: (``[fred.chiplets]``; empty when the platform does not say)
    chiplets: dict = field(default_factory=dict)
    #: latency of an L1-L2 link when it differs from ``link_latency_ns`` (``[link]
    #: l1_l2_latency_ns``; None: every link has ``link_latency_ns``)
    l1_l2_latency_ns: float | None = None
    #: latency an NPU adds between receiving a flit and sending it on in an endpoint algorithm
    #: (a ring's step, a chain's forwarding hop), ns (``[npu] forward_latency_ns``; the paper
    #: does not say: 0)
    forward_latency_ns: float = 0.0
    #: latency a member of an I/O reduce tree (``io-store`` on the mesh) adds between its
    #: children's flits and its sum, ns, when it differs from ``forward_latency_ns`` (None: it
    #: does not; a platform built in code for an RTL whose reducers are not its collective
    #: engines, ``sysmodel.mesh_rtl_model.mesh_io_platform``)
    reduce_forward_latency_ns: float | None = None
    #: how the switches route an endpoint algorithm's unicasts (``[fred] unicast_routing``):
    #: ``online`` (as packets arrive, no setup: the paper's switches) or ``configured`` (as
    #: configured flows whose phase is selected when the collective starts, like an in-switch
    #: collective's: the RTL fabric (docs/fabric_rtl.md), whose switches have no online routing)
    unicast_routing: str = "online"
    #: when an in-switch collective's first phase is selected (``[fred] phase_select``):
    #: ``start`` (every switch when the collective starts, in parallel while the flits travel:
    #: the circuit fabric's phase sequencers) or ``header`` (each switch when the first packet
    #: header reaches it, so the selects add up along the path; a packet switch's input VC
    #: buffer adds its latency per switch): the packet switch (docs/sysmodel.md)
    phase_select: str = "start"
    #: whether a FRED switch serves one phase at a time (``[fred] one_phase_per_switch``; the
    #: shared spec's switch: true): transfers crossing a common switch take turns there, by
    #: priority, even on disjoint links (:mod:`sysmodel.switch_phases`); false is a what-if
    #: (links shared only)
    one_phase_per_switch: bool = True
    #: flits of a buffer per virtual channel (``[fred] vc_buffer_flits``; 0: not modelled):
    #: a switch input's and an I/O controller's receive buffer; what a reduce-out has left to
    #: write into its controller when the controller's L1 may start its last packet, so what
    #: it still writes after its turn has passed (:attr:`sysmodel.network.Traffic.paced_turn_s`).
    #: The RTL packet fabric's is ``hdl.contracts.fabric.default_depth`` (its switches' input
    #: buffers and its controllers' receive buffers; written by
    #: :func:`sysmodel.fabric_model.fabric_platform_toml`); the paper's platform does not set it
    vc_buffer_flits: int = 0
    #: the flit a mesh's endpoint engines move (``[mesh] flit_bytes``): each chunk of a mesh
    #: ring or hierarchical 2D all-reduce is then sent as whole flits per piece, padded as the
    #: RTL mesh's engines pad it (:func:`hdl.compiler.algorithms.two_chunk_flits`); 0: the
    #: mesh is byte-granular (the paper's: its link format is not specified)
    mesh_flit_bytes: int = 0

    def __post_init__(self):
        # read-only tables: the platform is a value (hashable, safe to share between caches)
        object.__setattr__(self, "variants", FrozenDict(self.variants))
        object.__setattr__(self, "chiplets", FrozenDict(self.chiplets))
        if self.compute is not None:   # the compute model follows the NPU's peak and HBM
            object.__setattr__(self, "compute", self.compute.with_hardware(
                self.peak_tflops, self.memory_bandwidth_gbps))
        # every field's type and range: the platform file's own schema (_PlatformValues), so a
        # platform built in code (scaled, replace) is held to what a file is
        document = {section: {key: getattr(self, attr) for key, attr in keys.items()}
                    for section, keys in _LAYOUT.items()}
        validate_input(_PlatformValues, document, f"platform {self.name}")
        if self.reduce_forward_latency_ns is not None and not self.reduce_forward_latency_ns >= 0:
            raise FredError(f"reduce_forward_latency_ns must be >= 0 or None, got "
                            f"{self.reduce_forward_latency_ns!r}")
        if self.l2_switch is not None and self.l2_switch.flit_bytes != self.switch.flit_bytes:
            # a flit crosses both levels whole: the two switches must agree on its size
            raise FredError(f"the L1 and L2 switch timings disagree on flit_bytes "
                            f"({self.switch.flit_bytes} vs {self.l2_switch.flit_bytes})")
        if self.has_mesh and self.mesh_rows * self.mesh_cols != self.npus:
            raise FredError(f"mesh {self.mesh_rows}x{self.mesh_cols} has "
                            f"{self.mesh_rows * self.mesh_cols} NPUs but npu.count is {self.npus}")
        if self.has_mesh and self.io_controllers > 2 * (self.mesh_rows + self.mesh_cols):
            raise FredError(f"{self.io_controllers} I/O controllers do not fit on the "
                            f"{2 * (self.mesh_rows + self.mesh_cols)} free boundary ports of a "
                            f"{self.mesh_rows}x{self.mesh_cols} mesh")
        for name, variant in self.variants.items():
            if name == "mesh" or not re.fullmatch(r"[a-z][a-z0-9-]*", name):
                raise FredError(f"switch-tree variant name {name!r} must be lower-case letters, "
                                f"digits and '-', and not 'mesh'")
            validate_input(_Variant, {"l1_l2_gbps": variant.l1_l2_gbps, "in_switch": variant.in_switch,
                                      "in_switch_efficiency": variant.in_switch_efficiency},
                           f"platform {self.name}", prefix=("fred", "variants", name))
        for attr, section in _SECTIONS.items():   # not dataclass fields: replace() rebuilds them
            object.__setattr__(self, attr, section(**{f: getattr(self, f) for f in section.__dataclass_fields__}))

    # -- derived quantities ---------------------------------------------------------------
    def switch_at(self, level: str) -> SwitchTiming:
        """Timing of the switches of ``level`` (``l1`` or ``l2``): the L2's own when the
        platform's chiplets give it one, else ``switch``."""
        if level == "l1":
            return self.switch
        if level == "l2":
            return self.l2_switch or self.switch
        raise FredError(f"switch level {level!r} is not l1 or l2")

    @property
    def has_mesh(self) -> bool:
        return bool(self.mesh_rows or self.mesh_cols)

    @property
    def l1_count(self) -> int:
        return math.ceil(self.npus / self.npus_per_l1)

    @property
    def link_latency_s(self) -> float:
        return self.link_latency_ns * 1e-9

    @property
    def l1_l2_latency_s(self) -> float:
        """Latency of an L1-L2 link (``link_latency_s`` unless the platform sets its own)."""
        return (self.link_latency_ns if self.l1_l2_latency_ns is None else self.l1_l2_latency_ns) * 1e-9

    @property
    def peak_flops(self) -> float:
        return self.peak_tflops * 1e12

    @property
    def memory_capacity_bytes(self) -> float:
        return self.memory_capacity_gb * GB

    def variant(self, fabric: str) -> FredVariant:
        if fabric not in self.variants:
            raise FredError(f"fabric {fabric!r} is not defined by platform {self.name!r}; "
                            f"available: {', '.join(['mesh', *self.variants])}")
        return self.variants[fabric]

    @property
    def fabrics(self) -> tuple[str, ...]:
        return (("mesh",) if self.has_mesh else ()) + tuple(sorted(self.variants))

    def check_fabric(self, fabric: str) -> None:
        """Raise naming the available fabrics unless ``fabric`` is one of this platform's."""
        if fabric not in self.fabrics:
            raise FredError(f"fabric {fabric!r} is not defined by platform {self.name!r}; "
                            f"available: {', '.join(self.fabrics)}")

    def with_compute_scale(self, k: float) -> "Platform":
        """NPU compute ``k`` times faster: peak FLOPS and HBM bandwidth both x ``k`` (the
        what-if of ``--compute-scale`` and of the calibration in docs/sysmodel.md)."""
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not math.isfinite(k) or k <= 0:
            raise FredError(f"compute scale must be a positive number, got {k!r}")
        if k == 1:
            return self
        return replace(self, peak_tflops=self.peak_tflops * k,
                       memory_bandwidth_gbps=self.memory_bandwidth_gbps * k)

    def with_switch(self, switch: SwitchTiming, l2_switch: SwitchTiming | None = None) -> "Platform":
        """A copy timed by ``switch`` at L1 and ``l2_switch`` (default: ``switch``) at L2."""
        return replace(self, switch=switch, l2_switch=l2_switch)

    def scaled(self, **changes) -> "Platform":
        """A copy with some fields changed (used by sweeps and property tests)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__
               if k not in ("variants", "switch", "compute", "l2_switch")}
        out["compute"] = self.compute.to_dict() if self.compute else None
        out["variants"] = {n: {"l1_l2_gbps": v.l1_l2_gbps, "in_switch": v.in_switch,
                               "in_switch_efficiency": v.in_switch_efficiency}
                           for n, v in self.variants.items()}
        out["switch"] = self.switch.to_dict()
        out["switch_per_level"] = {level: self.switch_at(level).to_dict() for level in ("l1", "l2")}
        return out


def _check_sections() -> None:
    placed = [f for section in _SECTIONS.values() for f in section.__dataclass_fields__] + list(_LABEL_FIELDS)
    if sorted(placed) != sorted(Platform.__dataclass_fields__):
        raise FredError(f"Platform fields and their sections disagree: "
                        f"{sorted(set(Platform.__dataclass_fields__).symmetric_difference(placed))} "
                        f"(each field belongs to exactly one of {', '.join(_SECTIONS)} or the label)")


_check_sections()


# TOML layout: section -> {key: Platform field}
_LAYOUT = {
    "npu": {"count": "npus", "network_send_gbps": "npu_send_gbps",
            "network_recv_gbps": "npu_recv_gbps", "peak_tflops": "peak_tflops",
            "memory_bandwidth_gbps": "memory_bandwidth_gbps",
            "memory_capacity_gb": "memory_capacity_gb", "compute_efficiency": "compute_efficiency",
            "forward_latency_ns": "forward_latency_ns"},
    "io": {"controllers": "io_controllers", "controller_gbps": "io_gbps"},
    "link": {"latency_ns": "link_latency_ns", "efficiency": "link_efficiency",
             "l1_l2_latency_ns": "l1_l2_latency_ns"},
    "mesh": {"rows": "mesh_rows", "cols": "mesh_cols", "link_gbps": "mesh_link_gbps",
             "flit_bytes": "mesh_flit_bytes"},
    "fred": {"npus_per_l1": "npus_per_l1", "unicast_routing": "unicast_routing",
             "phase_select": "phase_select", "one_phase_per_switch": "one_phase_per_switch",
             "vc_buffer_flits": "vc_buffer_flits"},
    "training": {"optimizer_bytes_per_param": "optimizer_bytes_per_param",
                 "iterations": "iterations", "dp_bucket_elements": "dp_bucket_elements",
                 "dp_overlap": "dp_overlap",
                 "optimizer_step_bytes_per_param": "optimizer_step_bytes_per_param",
                 "pp_overlap": "pp_overlap", "pp_scatter_gather": "pp_scatter_gather"},
}
#: Keys that were accepted once and are no longer read: why, for the error message.
_REMOVED = {("training", "bytes_per_element"):
            "the workloads' element format is FP16 (sysmodel.workloads.BYTES), not a platform "
            "parameter; the key was never read"}


# -- the platform file's schema (pydantic; docs: configs/paper.toml) ---------------------------
class _Npu(InputModel):
    count: PositiveInt
    network_send_gbps: PositiveNumber
    network_recv_gbps: PositiveNumber
    peak_tflops: PositiveNumber
    memory_bandwidth_gbps: PositiveNumber
    memory_capacity_gb: PositiveNumber
    compute_efficiency: UnitFraction
    forward_latency_ns: NonNegativeNumber = 0.0


class _Io(InputModel):
    controllers: NonNegativeInt
    controller_gbps: PositiveNumber


class _Link(InputModel):
    latency_ns: NonNegativeNumber
    efficiency: UnitFraction = 1.0
    l1_l2_latency_ns: NonNegativeNumber | None = None


class _Mesh(InputModel):
    """``rows = cols = 0``: no mesh (what a file without ``[mesh]`` means)."""

    rows: NonNegativeInt
    cols: NonNegativeInt
    link_gbps: NonNegativeNumber
    flit_bytes: NonNegativeInt = 0

    @model_validator(mode="after")
    def _a_mesh_has_size_and_links(self):
        if (self.rows or self.cols) and not (self.rows and self.cols and self.link_gbps > 0):
            raise ValueError(f"a mesh needs rows >= 1, cols >= 1 and link_gbps > 0, got rows = "
                             f"{self.rows}, cols = {self.cols}, link_gbps = {self.link_gbps:g}")
        return self


class _Variant(InputModel):
    l1_l2_gbps: PositiveNumber
    in_switch: bool
    in_switch_efficiency: UnitFraction = 1.0


class _Chiplet(InputModel):
    ports: Annotated[int, Field(ge=2)]
    middle: Annotated[int, Field(ge=2)]
    dtype: str


class _Chiplets(InputModel):
    l1: _Chiplet
    l2: _Chiplet


class _Fred(InputModel):
    npus_per_l1: PositiveInt
    unicast_routing: Literal[UNICAST_ROUTING] = "online"
    phase_select: Literal[PHASE_SELECT] = "start"
    one_phase_per_switch: bool = True
    vc_buffer_flits: NonNegativeInt = 0
    variants: dict[str, _Variant] = {}
    chiplets: _Chiplets | None = None


class _Training(InputModel):
    optimizer_bytes_per_param: NonNegativeInt = 12
    iterations: PositiveInt = 2
    dp_bucket_elements: PositiveNumber = 5e8
    dp_overlap: bool = False
    optimizer_step_bytes_per_param: PositiveNumber | None = None
    pp_overlap: bool = True
    pp_scatter_gather: bool = False


class _PlatformFile(InputModel):
    name: str = "custom"
    description: str = ""
    compute: dict | None = None       # checked by sysmodel.compute.parse_compute
    npu: _Npu
    io: _Io = _Io(controllers=0, controller_gbps=1.0)
    link: _Link
    mesh: _Mesh = _Mesh(rows=0, cols=0, link_gbps=0.0)
    fred: _Fred
    training: _Training = _Training()


class _PlatformValues(InputModel):
    """A :class:`Platform`'s values laid out as the file's tables (its ``__post_init__``)."""

    npu: _Npu
    io: _Io
    link: _Link
    mesh: _Mesh
    fred: _Fred
    training: _Training


def parse_chiplets(data: dict, source: str = "<toml>") -> dict:
    """``[fred.chiplets]``: ``{level: {"ports", "middle", "dtype"}}`` for levels ``l1`` and
    ``l2`` (both, or neither), validated; ``{}`` when the platform does not name chiplets."""
    table = data.get("fred", {}).get("chiplets") if isinstance(data.get("fred"), dict) else None
    if table is None:
        return {}
    chiplets = validate_input(_Chiplets, table, source, prefix=("fred", "chiplets"))
    return {level: getattr(chiplets, level).model_dump() for level in ("l1", "l2")}


def parse_platform(data: dict, *, switch: SwitchTiming, l2_switch: SwitchTiming | None = None,
                   source: str = "<toml>") -> Platform:
    """Build a :class:`Platform` from a decoded TOML document (errors name the key) with the
    switch timing ``switch`` (L1; every level unless ``l2_switch`` is given)."""
    if "dimensions" in data:    # a cluster file (sysmodel/dimensions.py): not one wafer
        raise FredError(f"{source} is a cluster platform (it lists [[dimensions]]); this command "
                        f"takes one wafer's platform (`fred collective --platform` takes clusters)")
    for (section, key), why in _REMOVED.items():
        if isinstance(data.get(section), dict) and key in data[section]:
            raise FredError(f"{source}: {section}.{key} is not a platform parameter: {why}; remove it")
    doc = validate_input(_PlatformFile, data, source)
    kwargs = {attr: getattr(getattr(doc, section), key)
              for section, keys in _LAYOUT.items() for key, attr in keys.items()}
    variants = {name: FredVariant(name=name, l1_l2_gbps=v.l1_l2_gbps, in_switch=v.in_switch,
                                  in_switch_efficiency=v.in_switch_efficiency)
                for name, v in doc.fred.variants.items()}
    chiplets = {level: getattr(doc.fred.chiplets, level).model_dump() for level in ("l1", "l2")} \
        if doc.fred.chiplets is not None else {}
    compute = None
    if doc.compute is not None:
        compute = parse_compute(doc.compute, peak_tflops=doc.npu.peak_tflops,
                                memory_gbps=doc.npu.memory_bandwidth_gbps, source=source)
    try:
        return Platform(**kwargs, variants=variants, switch=switch, l2_switch=l2_switch,
                        chiplets=chiplets, compute=compute, name=doc.name,
                        description=doc.description)
    except FredError as exc:
        raise FredError(f"{source}: {exc}") from None


def load_platform(path: str | Path | None = None, *, characterization: str | Path | None = None) -> Platform:
    """Load a platform TOML (default: the shipped ``paper.toml``) with switch timing from the
    characterization file ``characterization`` (default: the one shipped with the package; see
    :func:`sysmodel.switch_timing.load_switch_timing` -- missing is an error)."""
    data, source = read_config_toml(path, shipped=DEFAULT_PLATFORM_NAME, what="platform")
    chiplets = parse_chiplets(data, source)
    if not chiplets:
        return parse_platform(data, switch=load_switch_timing(characterization), source=source)
    # each level timed by the chiplet that builds it (docs/sysmodel.md, "Chiplets")
    timings = load_chiplet_timings(chiplets, characterization, platform=source)
    return parse_platform(data, switch=timings["l1"], l2_switch=timings["l2"], source=source)


def default_platform() -> Platform:
    """The shipped paper platform with the shipped characterization (loaded once per model
    cache: :mod:`sysmodel.model_cache`, ``platforms``)."""
    return current().platforms.get_or_make((None, None, 1.0), load_platform)
