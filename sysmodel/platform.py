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

from hdl.contracts.errors import FredError
from sysmodel.compute import ComputeModel, parse_compute
from sysmodel.switch_timing import SwitchTiming, load_chiplet_timings, load_switch_timing
from sysmodel.toml_file import read_config_toml

__all__ = ["Platform", "FredVariant", "load_platform", "default_platform", "FABRICS",
           "DEFAULT_PLATFORM_NAME"]

DEFAULT_PLATFORM_NAME = "paper.toml"
#: Fabric names accepted everywhere (CLI, evaluation): the mesh baseline and the FRED variants.
FABRICS = ("mesh", "fred-a", "fred-b", "fred-c", "fred-d")

GB = 1e9


@dataclass(frozen=True)
class FredVariant:
    """One FRED variant: L1-L2 bandwidth per L1 (each direction) and in-switch collectives."""

    name: str
    l1_l2_gbps: float
    in_switch: bool


#: ``[fred] unicast_routing`` values (:attr:`Platform.unicast_routing`).
UNICAST_ROUTING = ("online", "configured")


@dataclass(frozen=True, kw_only=True)
class Platform:
    """A wafer platform (see ``configs/paper.toml`` for each value's source).

    Members (all keyword): ``npus``, ``npu_send_gbps``, ``npu_recv_gbps``, ``peak_tflops``,
    ``memory_bandwidth_gbps``, ``memory_capacity_gb``, ``compute_efficiency``,
    ``io_controllers``, ``io_gbps``, ``link_latency_ns`` (``l1_l2_latency_ns``: the L1-L2 links'
    own, optional), ``mesh_rows``, ``mesh_cols``,
    ``mesh_link_gbps``, ``npus_per_l1``, ``switch`` (:class:`SwitchTiming`, required: the
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
    #: how the switches route an endpoint algorithm's unicasts (``[fred] unicast_routing``):
    #: ``online`` (as packets arrive, no setup: the paper's switches) or ``configured`` (as
    #: configured flows whose phase is selected when the collective starts, like an in-switch
    #: collective's: the RTL fabric of issue 15, whose switches have no online routing)
    unicast_routing: str = "online"

    def __post_init__(self):
        if self.compute is not None:   # the compute model follows the NPU's peak and HBM
            object.__setattr__(self, "compute", self.compute.with_hardware(
                self.peak_tflops, self.memory_bandwidth_gbps))
        if isinstance(self.link_efficiency, bool) or not isinstance(self.link_efficiency, (int, float)) \
                or not 0 < self.link_efficiency <= 1:
            raise FredError(f"link.efficiency must be in (0, 1], got {self.link_efficiency!r}")
        _positive_int(self.npus, "npu.count")
        for name in ("npu_send_gbps", "npu_recv_gbps", "peak_tflops", "memory_bandwidth_gbps",
                     "memory_capacity_gb", "io_gbps"):
            _positive(getattr(self, name), name)
        if not 0 < self.compute_efficiency <= 1:
            raise FredError(f"npu.compute_efficiency must be in (0, 1], got {self.compute_efficiency}")
        for name in ("link_latency_ns", "l1_l2_latency_ns", "forward_latency_ns"):
            value = getattr(self, name)
            if value is None and name == "l1_l2_latency_ns":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                    or not math.isfinite(value):
                where = "npu" if name == "forward_latency_ns" else "link"
                raise FredError(f"{where}.{name.removeprefix('link_')} must be a number >= 0, got {value!r}")
        if self.unicast_routing not in UNICAST_ROUTING:
            raise FredError(f"fred.unicast_routing must be one of {', '.join(UNICAST_ROUTING)}, "
                            f"got {self.unicast_routing!r}")
        if isinstance(self.io_controllers, bool) or not isinstance(self.io_controllers, int) \
                or self.io_controllers < 0:
            raise FredError(f"io.controllers must be an integer >= 0, got {self.io_controllers!r}")
        if self.has_mesh:
            _positive_int(self.mesh_rows, "mesh.rows")
            _positive_int(self.mesh_cols, "mesh.cols")
            _positive(self.mesh_link_gbps, "mesh_link_gbps")
        _positive_int(self.npus_per_l1, "fred.npus_per_l1")
        _positive_int(self.iterations, "training.iterations")
        if self.optimizer_bytes_per_param < 0:
            raise FredError("training.optimizer_bytes_per_param must be >= 0")
        _positive(self.dp_bucket_elements, "training.dp_bucket_elements")
        for name in ("dp_overlap", "pp_overlap", "pp_scatter_gather"):
            if not isinstance(getattr(self, name), bool):
                raise FredError(f"training.{name} must be true or false, got {getattr(self, name)!r}")
        if self.optimizer_step_bytes_per_param is not None:
            _positive(self.optimizer_step_bytes_per_param, "training.optimizer_step_bytes_per_param")
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
            _positive(variant.l1_l2_gbps, f"fred.variants.{name}.l1_l2_gbps")

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
        out["variants"] = {n: {"l1_l2_gbps": v.l1_l2_gbps, "in_switch": v.in_switch}
                           for n, v in self.variants.items()}
        out["switch"] = self.switch.to_dict()
        out["switch_per_level"] = {level: self.switch_at(level).to_dict() for level in ("l1", "l2")}
        return out


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise FredError(f"{name} must be a positive number, got {value!r}")


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise FredError(f"{name} must be a positive integer, got {value!r}")


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
    "mesh": {"rows": "mesh_rows", "cols": "mesh_cols", "link_gbps": "mesh_link_gbps"},
    "fred": {"npus_per_l1": "npus_per_l1", "unicast_routing": "unicast_routing"},
    "training": {"optimizer_bytes_per_param": "optimizer_bytes_per_param",
                 "iterations": "iterations", "dp_bucket_elements": "dp_bucket_elements",
                 "dp_overlap": "dp_overlap",
                 "optimizer_step_bytes_per_param": "optimizer_step_bytes_per_param",
                 "pp_overlap": "pp_overlap", "pp_scatter_gather": "pp_scatter_gather"},
}
_OPTIONAL = {"l1_l2_latency_ns", "optimizer_bytes_per_param", "iterations", "dp_bucket_elements",
             "dp_overlap", "link_efficiency", "mesh_rows", "mesh_cols", "mesh_link_gbps",
             "optimizer_step_bytes_per_param", "pp_overlap", "pp_scatter_gather", "forward_latency_ns",
             "unicast_routing"}
#: Keys that were accepted once and are no longer read: why, for the error message.
_REMOVED = {("training", "bytes_per_element"):
            "the workloads' element format is FP16 (sysmodel.workloads.BYTES), not a platform "
            "parameter; the key was never read"}


def parse_chiplets(data: dict, source: str = "<toml>") -> dict:
    """``[fred.chiplets]``: ``{level: {"ports", "middle", "dtype"}}`` for levels ``l1`` and
    ``l2`` (both, or neither), validated; ``{}`` when the platform does not name chiplets."""
    table = data.get("fred", {}).get("chiplets")
    if table is None:
        return {}
    if not isinstance(table, dict) or set(table) != {"l1", "l2"}:
        raise FredError(f"{source}: fred.chiplets needs exactly l1 and l2 (the design each level is "
                        f"built from), got {sorted(table) if isinstance(table, dict) else table!r}")
    out = {}
    for level, entry in table.items():
        where = f"fred.chiplets.{level}"
        if not isinstance(entry, dict) or set(entry) != {"ports", "middle", "dtype"}:
            raise FredError(f"{source}: {where} needs exactly ports, middle and dtype")
        for key, low in (("ports", 2), ("middle", 2)):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise FredError(f"{source}: {where}.{key} must be an integer >= {low}, got {value!r}")
        if not isinstance(entry["dtype"], str):
            raise FredError(f"{source}: {where}.dtype must be a string, got {entry['dtype']!r}")
        out[level] = {"ports": entry["ports"], "middle": entry["middle"], "dtype": entry["dtype"]}
    return out


def parse_platform(data: dict, *, switch: SwitchTiming, l2_switch: SwitchTiming | None = None,
                   source: str = "<toml>") -> Platform:
    """Build a :class:`Platform` from a decoded TOML document (errors name the key) with the
    switch timing ``switch`` (L1; every level unless ``l2_switch`` is given)."""
    kwargs = {}
    known_top = set(_LAYOUT) | {"name", "description", "compute"}
    for key in data:
        if key not in known_top:
            raise FredError(f"{source}: unknown section or key {key!r}")
    for section, keys in _LAYOUT.items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise FredError(f"{source}: [{section}] must be a table")
        for key in table:
            if (section, key) in _REMOVED:
                raise FredError(f"{source}: {section}.{key} is not a platform parameter: "
                                f"{_REMOVED[(section, key)]}; remove it")
            if key not in keys and not (section == "fred" and key in ("variants", "chiplets")):
                raise FredError(f"{source}: unknown key {section}.{key}")
        for key, attr in keys.items():
            if key in table:
                kwargs[attr] = table[key]
            elif section == "io" and section not in data:
                kwargs[attr] = {"io_controllers": 0, "io_gbps": 1.0}[attr]
            elif section == "mesh" and section not in data:
                kwargs[attr] = 0
            elif attr not in _OPTIONAL:
                raise FredError(f"{source}: missing {section}.{key}")
    variants = {}
    for name, entry in data.get("fred", {}).get("variants", {}).items():
        if not isinstance(entry, dict) or set(entry) != {"l1_l2_gbps", "in_switch"}:
            raise FredError(f"{source}: fred.variants.{name} needs exactly l1_l2_gbps and in_switch")
        if not isinstance(entry["in_switch"], bool):
            raise FredError(f"{source}: fred.variants.{name}.in_switch must be true or false")
        variants[name] = FredVariant(name=name, l1_l2_gbps=entry["l1_l2_gbps"],
                                     in_switch=entry["in_switch"])
    chiplets = parse_chiplets(data, source)
    compute = None
    if "compute" in data:
        compute = parse_compute(data["compute"], peak_tflops=kwargs.get("peak_tflops", 1.0),
                                memory_gbps=kwargs.get("memory_bandwidth_gbps", 1.0), source=source)
    try:
        return Platform(**kwargs, variants=variants, switch=switch, l2_switch=l2_switch,
                        chiplets=chiplets, compute=compute,
                        name=str(data.get("name", "custom")),
                        description=str(data.get("description", "")))
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


_DEFAULT = None


def default_platform() -> Platform:
    """The shipped paper platform with the shipped characterization (cached)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_platform()
    return _DEFAULT
