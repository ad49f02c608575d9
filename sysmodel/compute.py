"""Compute time that depends on shape: GEMM efficiency from the matrix dimensions and data
type, bandwidth-bound element-wise work (docs/sysmodel.md, Fidelity).

A layer's forward work is a list of :class:`Gemm` (matrix products) and :class:`VectorOp`
(element-wise / reduction kernels: LayerNorm, GeLU, dropout, residual adds, softmax). Their
time on one NPU comes from :class:`ComputeModel`, the ``[compute]`` section of a platform file:

* **GEMM** ``C[m,n] = A[m,k] B[k,n]`` (``batch`` independent instances):
  ``time = max(2*m*n*k*batch / (peak(dtype) * efficiency), bytes(A+B+C) / HBM)`` with

      efficiency = gemm_peak_fraction * tile_utilisation * k / (k + k_overhead)

  - ``tile_utilisation``: the output is cut into tiles run one per streaming multiprocessor
    (SM) in waves; a library picks the tile shape that wastes least. For each tile shape
    ``(tm, tn, relative efficiency)``: tile quantisation ``m*n / (ceil(m/tm)*tm * ceil(n/tn)*tn)``
    times wave quantisation ``tiles / (ceil(tiles/SMs) * SMs)`` times the tile's relative
    efficiency (small tiles reuse less of what they load); the best shape wins. This is the
    mechanism of NVIDIA's "Matrix Multiplication Background User's Guide" (tile and wave
    quantisation), written from that description, not a measured table.
  - ``k / (k + k_overhead)``: each tile's pipeline prologue/epilogue costs about
    ``k_overhead`` steps of the reduction loop, so short reductions (attention's head
    dimension, 64-128) run far below peak.
  - ``gemm_peak_fraction``: the fraction of the data sheet's dense peak that a large,
    well-shaped GEMM sustains (clocks under load, instruction issue).
* **element-wise** work moves ``bytes`` through HBM at ``vector_efficiency`` of its bandwidth
  (attention's softmax and dropout, LayerNorm, GeLU, residual adds are bandwidth-bound).
* **backward**: each GEMM ``(m, n, k)`` becomes its data gradient ``(m, k, n)`` and its weight
  gradient ``(k, n, m)``, each timed with its own shape; element-wise work moves twice the
  forward bytes (read the saved input and the incoming gradient, write the outgoing one).

A platform without a ``[compute]`` section keeps the flat roofline (every FLOP at
``npu.compute_efficiency`` of peak), which is what layers without GEMM shapes always use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

from pydantic import Field

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import (InputModel, NonNegativeNumber, PositiveInt, PositiveNumber,
                                        UnitFraction, validate_input)
from sysmodel.model_cache import FrozenDict

__all__ = ["Gemm", "VectorOp", "ComputeModel", "DTYPE_BYTES", "parse_compute"]

#: Bytes per element of the data types the model knows (the switch's formats and FP32).
DTYPE_BYTES = {"fp8": 1, "fp16": 2, "bf16": 2, "fp32": 4}


@dataclass(frozen=True)
class Gemm:
    """One forward matrix product of a layer, per sample.

    ``m`` rows (tokens or output pixels of one sample when ``merge``: the rows of the samples
    of a microbatch stack into one product; else the rows of one instance), ``n`` columns,
    ``k`` the reduction length, ``count`` instances per sample (batched products, e.g. one per
    attention head). ``shard``: which of ``n``, ``k``, ``count`` Megatron-style model
    parallelism divides (``none``: replicated). ``core``: part of the attention core that
    selective recomputation recomputes (Korthikanti et al. 2022)."""

    m: float
    n: float
    k: float
    count: float = 1
    shard: str = "n"
    merge: bool = True
    core: bool = False

    def __post_init__(self):
        for name in ("m", "n", "k", "count"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not math.isfinite(v):
                raise FredError(f"GEMM {name} must be a positive number, got {v!r}")
        if self.shard not in ("n", "k", "count", "none"):
            raise FredError(f"GEMM shard must be n, k, count or none, got {self.shard!r}")

    @property
    def flops(self) -> float:
        """Forward FLOPs per sample (unsharded)."""
        return 2.0 * self.m * self.n * self.k * self.count

    def shape(self, samples: float, mp: int) -> tuple[float, float, float, float]:
        """(m, n, k, batch) of the product on one NPU for ``samples`` samples and MP ``mp``."""
        m, n, k, count = self.m, self.n, self.k, self.count
        if self.shard == "n":
            n = n / mp
        elif self.shard == "k":
            k = k / mp
        elif self.shard == "count":
            count = count / mp
        if self.merge:
            return m * samples, n, k, count
        return m, n, k, count * samples


@dataclass(frozen=True)
class VectorOp:
    """Bandwidth-bound forward work of a layer: ``bytes`` moved through HBM per sample.
    ``shard``: ``none`` (every MP rank does all of it), ``mp`` (split over MP ranks, e.g. per
    head or on the 4h MLP width), ``sp`` (split only under sequence parallelism: LayerNorm,
    dropout and residual adds on the hidden state). ``core``: recomputed by selective
    recomputation."""

    bytes: float
    shard: str = "none"
    core: bool = False

    def __post_init__(self):
        if isinstance(self.bytes, bool) or not isinstance(self.bytes, (int, float)) or self.bytes < 0:
            raise FredError(f"element-wise bytes must be >= 0, got {self.bytes!r}")
        if self.shard not in ("none", "mp", "sp"):
            raise FredError(f"element-wise shard must be none, mp or sp, got {self.shard!r}")

    def per_npu(self, samples: float, mp: int, sequence_parallel: bool) -> float:
        div = mp if (self.shard == "mp" or (self.shard == "sp" and sequence_parallel)) else 1
        return self.bytes * samples / div


@dataclass(frozen=True)
class ComputeModel:
    """The shape-dependent compute model of one NPU (see the module docstring).

    ``peak_tflops``: the dense FP16/BF16 peak (the platform's ``npu.peak_tflops``);
    ``memory_gbps``: HBM bandwidth (``npu.memory_bandwidth_gbps``); ``dtype_speed``: peak of
    each data type relative to FP16 (default: BF16 1, FP8 2, FP32 0.5 -- TF32 tensor cores on
    A100/H100); ``sms``: streaming multiprocessors (parallel tile slots); ``tiles``: ((tm, tn,
    relative efficiency), ...); ``gemm_peak_fraction``, ``k_overhead``, ``vector_efficiency``."""

    peak_tflops: float
    memory_gbps: float
    sms: int
    tiles: tuple
    gemm_peak_fraction: float
    k_overhead: float
    vector_efficiency: float
    dtype_speed: dict = field(default_factory=lambda: dict(DEFAULT_DTYPE_SPEED))
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self):
        # read-only: the model is part of the platform's value (hashable; its _cache is not)
        object.__setattr__(self, "dtype_speed", FrozenDict(self.dtype_speed))
        _positive(self.peak_tflops, "npu.peak_tflops")
        _positive(self.memory_gbps, "npu.memory_bandwidth_gbps")
        for dtype, v in self.dtype_speed.items():
            if dtype not in DTYPE_BYTES:
                raise FredError(f"compute.dtype_speed: unknown data type {dtype!r}; "
                                f"expected {', '.join(DTYPE_BYTES)}")
            _positive(v, f"compute.dtype_speed.{dtype}")
        if isinstance(self.sms, bool) or not isinstance(self.sms, int) or self.sms < 1:
            raise FredError(f"compute.sms must be a positive integer, got {self.sms!r}")
        if not self.tiles:
            raise FredError("compute.tiles needs at least one [rows, cols, relative efficiency]")
        for t in self.tiles:
            if len(t) != 3 or t[0] < 1 or t[1] < 1 or not 0 < t[2] <= 1:
                raise FredError(f"compute.tiles entry {list(t)} must be [rows >= 1, cols >= 1, "
                                f"relative efficiency in (0, 1]]")
        for name in ("gemm_peak_fraction", "vector_efficiency"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise FredError(f"compute.{name} must be in (0, 1], got {v!r}")
        if isinstance(self.k_overhead, bool) or not isinstance(self.k_overhead, (int, float)) \
                or self.k_overhead < 0:
            raise FredError(f"compute.k_overhead must be >= 0, got {self.k_overhead!r}")

    def peak_flops(self, dtype: str) -> float:
        if dtype not in self.dtype_speed:
            raise FredError(f"the platform gives no speed for data type {dtype!r}; it has "
                            f"{', '.join(self.dtype_speed)}")
        return self.peak_tflops * self.dtype_speed[dtype] * 1e12

    def with_hardware(self, peak_tflops: float, memory_gbps: float) -> "ComputeModel":
        """The same model on an NPU of another peak and HBM bandwidth."""
        if peak_tflops == self.peak_tflops and memory_gbps == self.memory_gbps:
            return self
        return replace(self, peak_tflops=peak_tflops, memory_gbps=memory_gbps, _cache={})

    def tile_utilisation(self, m: float, n: float, batch: float = 1) -> float:
        """Best (tile quantisation x wave quantisation x relative efficiency) over the tiles."""
        best = 0.0
        for tm, tn, rel in self.tiles:
            tiles = math.ceil(m / tm) * math.ceil(n / tn) * math.ceil(batch)
            quant = (m * n * batch) / (tiles * tm * tn)
            waves = math.ceil(tiles / self.sms)
            best = max(best, quant * tiles / (waves * self.sms) * rel)
        return best

    def gemm_efficiency(self, m: float, n: float, k: float, batch: float = 1) -> float:
        """Fraction of the data type's peak a GEMM of this shape sustains."""
        return self.gemm_peak_fraction * self.tile_utilisation(m, n, batch) * k / (k + self.k_overhead)

    def gemm_time(self, m: float, n: float, k: float, batch: float = 1, dtype: str = "fp16") -> float:
        key = (m, n, k, batch, dtype)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        flops = 2.0 * m * n * k * batch
        t_compute = flops / (self.peak_flops(dtype) * self.gemm_efficiency(m, n, k, batch))
        t_memory = DTYPE_BYTES[dtype] * (m * k + k * n + m * n) * batch / (self.memory_gbps * 1e9)
        out = max(t_compute, t_memory)
        self._cache[key] = out
        return out

    def vector_time(self, nbytes: float) -> float:
        return nbytes / (self.memory_gbps * 1e9 * self.vector_efficiency)

    def layer_time(self, gemms, vectors, *, samples: float, mp: int, dtype: str,
                   backward: bool, sequence_parallel: bool = False, only_core: bool = False) -> float:
        """Time of a layer's GEMMs and element-wise work for ``samples`` samples on one NPU
        (forward, or backward = data + weight gradients); ``only_core``: the attention core
        only (what selective recomputation repeats)."""
        t = 0.0
        for g in gemms:
            if only_core and not g.core:
                continue
            m, n, k, b = g.shape(samples, mp)
            if backward:
                t += self.gemm_time(m, k, n, b, dtype) + self.gemm_time(k, n, m, b, dtype)
            else:
                t += self.gemm_time(m, n, k, b, dtype)
        nbytes = sum(v.per_npu(samples, mp, sequence_parallel) for v in vectors
                     if v.core or not only_core)
        return t + self.vector_time(nbytes * (2 if backward else 1))

    def to_dict(self) -> dict:
        return {"peak_tflops": self.peak_tflops, "memory_gbps": self.memory_gbps,
                "sms": self.sms, "tiles": [list(t) for t in self.tiles],
                "gemm_peak_fraction": self.gemm_peak_fraction, "k_overhead": self.k_overhead,
                "vector_efficiency": self.vector_efficiency, "dtype_speed": dict(self.dtype_speed)}


#: Peak of each data type relative to FP16 on A100/H100 tensor cores (NVIDIA data sheets:
#: BF16 = FP16, FP8 2x (H100), TF32 0.5x).
DEFAULT_DTYPE_SPEED = {"fp16": 1.0, "bf16": 1.0, "fp8": 2.0, "fp32": 0.5}


#: One GEMM tile: ``[rows >= 1, cols >= 1, relative efficiency in (0, 1]]`` (a TOML array, so
#: the tuple itself is lax; each element keeps its strict type).
_Tile = Annotated[tuple[PositiveInt, PositiveInt, UnitFraction], Field(strict=False)]


class _ComputeTable(InputModel):
    """The platform file's ``[compute]`` table (``docs/sysmodel.md``, Fidelity)."""

    sms: PositiveInt
    tiles: Annotated[list[_Tile], Field(min_length=1)]
    gemm_peak_fraction: UnitFraction
    k_overhead: NonNegativeNumber
    vector_efficiency: UnitFraction
    dtype_speed: dict[Literal[tuple(DTYPE_BYTES)], PositiveNumber] = {}


def parse_compute(table: dict, *, peak_tflops: float, memory_gbps: float,
                  source: str = "<toml>") -> ComputeModel:
    """A :class:`ComputeModel` from a ``[compute]`` table, validated by its schema (errors name
    the file, the table and the key); peak and HBM bandwidth come from the platform's ``[npu]``
    section. Data types ``dtype_speed`` leaves out keep :data:`DEFAULT_DTYPE_SPEED`."""
    doc = validate_input(_ComputeTable, table, source, prefix=("compute",))
    try:
        return ComputeModel(peak_tflops=peak_tflops, memory_gbps=memory_gbps, sms=doc.sms,
                            tiles=tuple(tuple(t) for t in doc.tiles),
                            gemm_peak_fraction=doc.gemm_peak_fraction, k_overhead=doc.k_overhead,
                            vector_efficiency=doc.vector_efficiency,
                            dtype_speed={**DEFAULT_DTYPE_SPEED, **doc.dtype_speed})
    except FredError as exc:
        raise FredError(f"{source}: {exc}") from None


def _positive(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise FredError(f"{name} must be a positive number, got {v!r}")
