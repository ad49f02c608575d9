"""A network of several dimensions: the cluster platform file (docs/cluster.md, "Platform file").

A cluster is an ordered list of dimensions, innermost first, as in ASTRA-sim 2.0 (Won et al.)
and Themis (Rashidi et al., ISCA 2022): NPU ``r`` has coordinate ``r mod n_0`` in dimension 0,
``(r // n_0) mod n_1`` in dimension 1, and so on, and a dimension's groups are the NPUs that
differ only in its coordinate. Each dimension is one of

* ``ring``: a bidirectional ring (endpoint algorithms, ``size - 1`` dependent steps);
* ``fully-connected``: a direct link between every pair (one step);
* ``switch``: every member on one switch (one step); ``in_network = true`` when the switch
  reduces (all-reduce sends the buffer once instead of ``2 (n-1)/n`` of it);
* ``fred``: this project's FRED wafer tree, timed by the wafer model
  (:mod:`sysmodel.collectives`) on the wafer platform ``wafer`` with fabric ``fabric``;
* ``mesh``: this project's 2D mesh wafer, timed the same way (fabric ``mesh``);
* ``optical-ring``: a WDM optical ring (``wavelengths`` of ``wavelength_gbps`` each, O/E/O
  ``latency_ns`` per step, ``hop_loss_db`` per hop, ``loss_budget_db``) whose all-reduce runs
  ``algorithm`` ``wrht`` (default), ``ring`` or ``recursive-doubling`` (:mod:`sysmodel.optical`).

``bandwidth_gbps`` is what one NPU sends into the dimension per direction (GBps = 1e9 B/s) and
``latency_ns`` the latency of one dependent step. A ``fred`` or ``mesh`` dimension takes both,
and ``in_network``, from its wafer platform (the NPU's network bandwidth, the link latency, the
variant's in-switch collectives); naming them is an error, so a cluster cannot contradict its
wafer. The file is validated with the project's pydantic input schema
(:mod:`hdl.contracts.input_schema`): unknown keys, zero bandwidth, sizes whose product is not
``npus`` are errors naming the file and the dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import model_validator

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import (InputModel, NonNegativeNumber, PositiveInt, PositiveNumber,
                                        validate_input)
from sysmodel.optical import OPTICAL_ALGORITHMS, OpticalRing
from sysmodel.platform import Platform, load_platform
from sysmodel.toml_file import read_config_toml

__all__ = ["DIMENSION_KINDS", "WAFER_KINDS", "Dimension", "Cluster", "load_cluster",
           "is_cluster_document", "is_cluster_file", "cluster_from_document", "wafer_cluster",
           "with_bandwidth", "with_wafer", "resolve_cluster_path"]

#: Dimension kinds a cluster file may name.
DIMENSION_KINDS = ("ring", "fully-connected", "switch", "fred", "mesh", "optical-ring")
#: Kinds timed by the wafer model of this project instead of a closed-form formula.
WAFER_KINDS = ("fred", "mesh")


@dataclass(frozen=True)
class Dimension:
    """One dimension: ``name``, ``kind`` (:data:`DIMENSION_KINDS`), ``size`` (members per
    group), ``bandwidth_gbps`` (per NPU per direction), ``latency_ns`` (per dependent step),
    ``in_network`` (the dimension reduces in the network), and for ``fred``/``mesh`` the wafer
    platform and fabric whose model times it."""

    name: str
    kind: str
    size: int
    bandwidth_gbps: float
    latency_ns: float
    in_network: bool
    wafer: Platform | None = None
    fabric: str | None = None
    #: optical-ring: the WDM ring and the all-reduce algorithm run on it
    optical: OpticalRing | None = None
    algorithm: str | None = None

    @property
    def bandwidth_bps(self) -> float:
        return self.bandwidth_gbps * 1e9

    @property
    def latency_s(self) -> float:
        return self.latency_ns * 1e-9


@dataclass(frozen=True)
class Cluster:
    """An ordered tuple of :class:`Dimension` (innermost first) over ``npus`` NPUs."""

    name: str
    description: str
    npus: int
    dimensions: tuple[Dimension, ...]

    def dimension(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise FredError(f"cluster {self.name!r} has no dimension {name!r}; "
                        f"dimensions: {', '.join(d.name for d in self.dimensions)}")

    def to_dict(self) -> dict:
        return {"name": self.name, "npus": self.npus,
                "dimensions": [{"name": d.name, "kind": d.kind, "size": d.size,
                                "bandwidth_gbps": d.bandwidth_gbps, "latency_ns": d.latency_ns,
                                "in_network": d.in_network, "fabric": d.fabric,
                                "wafer": d.wafer.name if d.wafer else None,
                                **({"optical": dict(d.optical.__dict__), "algorithm": d.algorithm}
                                   if d.optical else {})}
                               for d in self.dimensions]}


# -- the file's schema --------------------------------------------------------------------------
class _Dimension(InputModel):
    name: str
    kind: Literal[DIMENSION_KINDS]
    size: PositiveInt
    bandwidth_gbps: PositiveNumber | None = None
    latency_ns: NonNegativeNumber | None = None
    in_network: bool | None = None
    #: fred / mesh: the wafer platform file (a path relative to the cluster file, or the name
    #: of a shipped platform such as ``paper.toml``) and its fabric
    wafer: str | None = None
    fabric: str | None = None
    #: optical-ring only (sysmodel.optical): WDM channels per fiber direction, GBps per
    #: wavelength, insertion loss per hop and the loss budget of a path (dB), the algorithm
    wavelengths: PositiveInt | None = None
    wavelength_gbps: PositiveNumber | None = None
    hop_loss_db: NonNegativeNumber | None = None
    loss_budget_db: NonNegativeNumber | None = None
    algorithm: Literal[OPTICAL_ALGORITHMS] | None = None

    @model_validator(mode="after")
    def _keys_fit_the_kind(self):
        optical = ("wavelengths", "wavelength_gbps", "hop_loss_db", "loss_budget_db", "algorithm")
        if self.kind != "optical-ring":
            given = [k for k in optical if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} apply to optical-ring dimensions only")
        if self.kind == "optical-ring":
            _optical_keys(self)
        elif self.kind in WAFER_KINDS:
            given = [k for k in ("bandwidth_gbps", "latency_ns", "in_network") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"a {self.kind} dimension takes {', '.join(given)} from its wafer "
                                 f"platform; remove {'it' if len(given) == 1 else 'them'}")
            if self.fabric is None:
                raise ValueError(f"a {self.kind} dimension needs fabric "
                                 f"({'mesh' if self.kind == 'mesh' else 'a FRED variant, e.g. fred-d'})")
            if (self.kind == "mesh") != (self.fabric == "mesh"):
                raise ValueError(f"a {self.kind} dimension cannot use fabric {self.fabric!r}")
        else:
            missing = [k for k in ("bandwidth_gbps", "latency_ns") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"a {self.kind} dimension needs {' and '.join(missing)}")
            extra = [k for k in ("wafer", "fabric") if getattr(self, k) is not None]
            if extra:
                raise ValueError(f"{' and '.join(extra)} apply to fred and mesh dimensions only")
            if self.in_network and self.kind != "switch":
                raise ValueError(f"in_network applies to switch dimensions (a {self.kind} has no "
                                 f"switch to reduce in)")
        return self


def _optical_keys(spec: _Dimension) -> None:
    missing = [k for k in ("wavelengths", "wavelength_gbps", "latency_ns", "hop_loss_db", "loss_budget_db")
               if getattr(spec, k) is None]
    if missing:
        raise ValueError(f"an optical-ring dimension needs {', '.join(missing)}")
    given = [k for k in ("bandwidth_gbps", "in_network", "wafer", "fabric") if getattr(spec, k) is not None]
    if given:
        raise ValueError(f"an optical-ring dimension takes no {', '.join(given)} (its bandwidth per "
                         f"transfer is wavelength_gbps)")


class _ClusterFile(InputModel):
    name: str = "cluster"
    description: str = ""
    npus: PositiveInt
    dimensions: list[_Dimension]

    @model_validator(mode="after")
    def _sizes_make_the_cluster(self):
        if not self.dimensions:
            raise ValueError("a cluster needs at least one dimension")
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise ValueError(f"dimension names must be distinct, got {names}")
        product = math.prod(d.size for d in self.dimensions)
        if product != self.npus:
            sizes = " x ".join(str(d.size) for d in self.dimensions)
            raise ValueError(f"the dimensions' sizes {sizes} = {product} NPUs, but npus is {self.npus}")
        return self


def is_cluster_document(data: dict) -> bool:
    """True when a decoded platform TOML describes a cluster (it lists ``dimensions``)."""
    return isinstance(data, dict) and "dimensions" in data


def _wafer(spec: _Dimension, base: Path | None, source: str, cache: dict, characterization) -> Platform:
    name = spec.wafer or "paper.toml"
    path = (base / name) if base is not None and (base / name).is_file() else None
    if path is None and name != "paper.toml":
        shipped = Path(__file__).parent / "configs" / name
        path = shipped if shipped.is_file() else None
        if path is None:
            raise FredError(f"{source}: dimension {spec.name!r}: wafer platform {name!r} is neither "
                            f"a file next to the cluster file nor a shipped platform")
    key = str(path)
    if key not in cache:
        cache[key] = load_platform(path, characterization=characterization)
    return cache[key]


def cluster_from_document(data: dict, source: str, *, base: Path | None = None,
                          characterization: str | Path | None = None) -> Cluster:
    """The :class:`Cluster` of a decoded cluster TOML ``data`` (errors name ``source``; wafer
    files are looked up next to ``base`` and timed by the switch ``characterization``, default
    the shipped one)."""
    doc = validate_input(_ClusterFile, data, source)
    dims, wafers = [], {}
    for spec in doc.dimensions:
        if spec.kind in WAFER_KINDS:
            wafer = _wafer(spec, base, source, wafers, characterization)
            try:
                wafer.check_fabric(spec.fabric)
            except FredError as exc:
                raise FredError(f"{source}: dimension {spec.name!r}: {exc}") from None
            if wafer.npus != spec.size:
                raise FredError(f"{source}: dimension {spec.name!r}: size {spec.size} but its wafer "
                                f"{wafer.name!r} has {wafer.npus} NPUs")
            in_network = spec.fabric != "mesh" and wafer.variant(spec.fabric).in_switch
            dims.append(Dimension(spec.name, spec.kind, spec.size, wafer.npu_send_gbps,
                                  wafer.link_latency_ns, in_network, wafer, spec.fabric))
        elif spec.kind == "optical-ring":
            ring = OpticalRing(spec.wavelengths, spec.wavelength_gbps, spec.latency_ns,
                               spec.hop_loss_db, spec.loss_budget_db)
            dims.append(Dimension(spec.name, spec.kind, spec.size, spec.wavelength_gbps, spec.latency_ns,
                                  False, optical=ring, algorithm=spec.algorithm or "wrht"))
        else:
            dims.append(Dimension(spec.name, spec.kind, spec.size, spec.bandwidth_gbps,
                                  spec.latency_ns, bool(spec.in_network)))
    return Cluster(doc.name, doc.description, doc.npus, tuple(dims))


def resolve_cluster_path(path: str | Path) -> Path:
    """``path``, or the shipped ``sysmodel/configs/<path>`` when ``path`` is a bare file name
    that is not a file here (``cluster-fred-wafers.toml``)."""
    path = Path(path)
    shipped = Path(__file__).parent / "configs" / path.name
    if not path.is_file() and path.parent == Path(".") and shipped.is_file():
        return shipped
    return path


def is_cluster_file(path: str | Path) -> bool:
    """True when the platform file ``path`` (or the shipped one of that name) is a cluster's."""
    path = resolve_cluster_path(path)
    if not path.is_file():
        return False
    data, _ = read_config_toml(path, shipped="", what="platform")
    return is_cluster_document(data)


def load_cluster(path: str | Path, *, characterization: str | Path | None = None) -> Cluster:
    """Load a cluster platform TOML (a path, or the name of a shipped one under
    ``sysmodel/configs/``, e.g. ``cluster-fred-wafers.toml``); its wafers' switches are timed
    by ``characterization`` (default: the shipped characterization)."""
    path = resolve_cluster_path(path)
    data, source = read_config_toml(path, shipped="", what="cluster platform")
    if not is_cluster_document(data):
        raise FredError(f"{source}: not a cluster platform (it lists no [[dimensions]])")
    return cluster_from_document(data, source, base=path.parent, characterization=characterization)


def wafer_cluster(platform: Platform, fabric: str) -> Cluster:
    """The wafer ``platform`` with ``fabric`` as a cluster of one dimension (its collectives
    are then the wafer model's own)."""
    platform.check_fabric(fabric)
    in_network = fabric != "mesh" and platform.variant(fabric).in_switch
    kind = "mesh" if fabric == "mesh" else "fred"
    dim = Dimension("wafer", kind, platform.npus, platform.npu_send_gbps, platform.link_latency_ns,
                    in_network, platform, fabric)
    return Cluster(platform.name, platform.description, platform.npus, (dim,))


def with_bandwidth(dim: Dimension, gbps: float) -> Dimension:
    """``dim`` with ``gbps`` per NPU per direction (an optical ring: per wavelength); a wafer
    dimension's bandwidth is its wafer's and cannot be set here."""
    if dim.kind in WAFER_KINDS:
        raise FredError(f"dimension {dim.name!r} is a {dim.kind} wafer: its bandwidth is its wafer platform's")
    if not (isinstance(gbps, (int, float)) and math.isfinite(gbps) and gbps > 0):
        raise FredError(f"dimension {dim.name!r}: bandwidth must be a number > 0 GBps, got {gbps!r}")
    optical = replace(dim.optical, wavelength_gbps=float(gbps)) if dim.optical else None
    return replace(dim, bandwidth_gbps=float(gbps), optical=optical)


def with_wafer(cluster: Cluster, platform: Platform | None = None, fabric: str | None = None) -> Cluster:
    """``cluster`` with its first dimension's wafer platform and/or fabric replaced (``None``:
    keep the file's): what ``fred eval`` uses to put mesh and Fred-A..D wafers in the same
    cluster, and ``fred dse`` a fabric design. The dimension's kind, bandwidth, latency and
    in-network reduction follow the new wafer, as when the file names it."""
    first, *outer = cluster.dimensions
    if first.kind not in WAFER_KINDS:
        raise FredError(f"cluster {cluster.name!r}: its first dimension {first.name!r} is a {first.kind}, "
                        f"not a wafer (fred or mesh); there is no wafer to replace")
    wafer = platform or first.wafer
    fabric = fabric or first.fabric
    wafer.check_fabric(fabric)
    if wafer.npus != first.size:
        raise FredError(f"cluster {cluster.name!r}: dimension {first.name!r} has {first.size} NPUs, "
                        f"the wafer {wafer.name!r} {wafer.npus}")
    in_network = fabric != "mesh" and wafer.variant(fabric).in_switch
    dim = replace(first, kind="mesh" if fabric == "mesh" else "fred", bandwidth_gbps=wafer.npu_send_gbps,
                  latency_ns=wafer.link_latency_ns, in_network=in_network, wafer=wafer, fabric=fabric)
    return replace(cluster, dimensions=(dim, *outer))
