"""Workload files: a training workload as data (TOML or JSON, one schema; docs/workloads.md).

```toml
[workload]
name = "gpt-3"
mode = "weight-streaming"         # or weight-stationary
strategy = "MP2-DP5-PP2"          # MP*DP*PP may use fewer NPUs than the platform has
microbatches = 2                  # pipeline microbatches per DP replica and iteration
samples_per_dp = 16               # minibatch per DP replica
# optional: description, sources, layers_on_wafer (2), recompute ("auto" | "none" |
# "selective" | "full"), sequence_parallel (false), interleave (1), dtype ("fp16"),
# pipeline_split ("flops": stages balanced by FLOPs | "layers": Megatron's equal split)

[transformer]                     # a GPT-style decoder from hyper-parameters ...
layers = 96
hidden = 12288
heads = 96
seq = 2048
vocab = 50257
# ffn = 49152                     # optional, default 4 * hidden

# ... or a layer table, one [[layer]] per layer, in execution order:
# [[layer]]
# name = "conv2_1"
# params = 75008                  # parameters
# in_bytes = 802816               # activation in / out per sample (bytes)
# out_bytes = 802816
# stored_bytes = 0                # activation kept for backward per sample, every MP rank
# stored_bytes_sharded = 4816896  # ... divided over MP ranks
# mp_allreduces = 1               # Megatron-style MP all-reduces per pass (default 2)
# mp_shardable = true
# fwd_flops = 1.4e9               # per sample; default: the GEMMs' FLOPs
# gemms = [{m = 3136, n = 64, k = 256}, ...]   # per sample; optional count, shard, merge, core
# vectors = [{bytes = 1.2e7, shard = "none"}]  # element-wise bytes per sample
```

Every key is checked: an unknown key, a missing one or a wrong type is an error naming the
file, the table (and for layers the index and name) and the key. A JSON file has the same
structure (``{"workload": {...}, "transformer": {...}}`` or ``"layer": [...]``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import (InputModel, NonNegativeInt, NonNegativeNumber, PositiveInt,
                                   PositiveNumber, validate_input)
from hdl.contracts.placement import parse_strategy
from sysmodel.compute import Gemm, VectorOp
from sysmodel.model_cache import current
from sysmodel.toml_file import parse_toml
from sysmodel.workloads import WORKLOADS, Layer, Workload, transformer
from hdl.contracts.text_file import read_text_file

__all__ = ["get_workload", "preset_path", "load_workload_file", "parse_workload", "workload_to_dict", "dump_toml"]

# -- the workload file's schema (pydantic; docs/workloads.md) -----------------------------------
class _Head(InputModel):
    name: str
    mode: str                      # checked by Workload (sysmodel.workloads.MODES)
    strategy: str                  # checked by parse_strategy
    microbatches: PositiveInt
    samples_per_dp: PositiveInt
    description: str = ""
    sources: str = ""
    layers_on_wafer: PositiveInt = 2
    recompute: str = "auto"        # checked by Workload (sysmodel.workloads.RECOMPUTE)
    sequence_parallel: bool = False
    interleave: PositiveInt = 1
    dtype: str = "fp16"
    pipeline_split: str = "flops"


class _Transformer(InputModel):
    layers: PositiveInt
    hidden: PositiveInt
    heads: PositiveInt
    seq: PositiveInt
    vocab: PositiveInt
    ffn: PositiveInt | None = None

    @model_validator(mode="after")
    def _heads_divide_hidden(self):
        if self.hidden % self.heads:
            raise ValueError(f"hidden = {self.hidden} is not a multiple of heads = {self.heads} "
                             f"(each head takes hidden / heads dimensions)")
        return self


class _Gemm(InputModel):
    m: PositiveNumber
    n: PositiveNumber
    k: PositiveNumber
    count: PositiveNumber = 1
    shard: str = "n"               # checked by Gemm
    merge: bool = True
    core: bool = False


class _Vector(InputModel):
    bytes: NonNegativeNumber
    shard: str = "none"            # checked by VectorOp
    core: bool = False


class _Layer(InputModel):
    name: str
    params: NonNegativeNumber
    in_bytes: NonNegativeNumber
    out_bytes: NonNegativeNumber
    stored_bytes: NonNegativeNumber = 0.0
    stored_bytes_sharded: NonNegativeNumber = 0.0
    mp_allreduces: NonNegativeInt = 2
    mp_shardable: bool = True
    fwd_flops: NonNegativeNumber | None = None
    gemms: list[_Gemm] = []
    vectors: list[_Vector] = []


class _WorkloadFile(InputModel):
    workload: _Head
    transformer: _Transformer | None = None
    layer: Annotated[list[_Layer], Field(min_length=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_model_description(cls, data):
        if isinstance(data, dict) and ("transformer" in data) == ("layer" in data):
            raise ValueError("give exactly one of [transformer] (hyper-parameters) or [[layer]] "
                             "(a layer table)")
        return data


def load_workload_file(path: str | Path) -> Workload:
    """A :class:`Workload` from a ``.toml`` or ``.json`` workload file."""
    path = Path(path)
    if not path.is_file():
        raise FredError(f"workload file {path} does not exist")
    text = read_text_file(path, "workload file")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FredError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                            f"{exc.msg}") from None
    elif path.suffix == ".toml":
        data = parse_toml(text, str(path))
    else:
        raise FredError(f"{path}: a workload file ends in .toml or .json (ASTRA-sim text "
                        f"workloads and Chakra traces are read by `fred replay`)")
    return parse_workload(data, source=str(path))


def parse_workload(data: dict, *, source: str = "<workload>") -> Workload:
    """A :class:`Workload` from a decoded workload document (errors name file and key)."""
    doc = validate_input(_WorkloadFile, data, source)
    w = doc.workload
    try:
        strategy = parse_strategy(w.strategy)
    except FredError as exc:
        raise FredError(f"{source}: workload.strategy: {exc}") from None
    given = w.model_fields_set
    options = {k: getattr(w, k) for k in ("layers_on_wafer", "recompute", "sequence_parallel",
                                          "interleave", "dtype", "samples_per_dp", "pipeline_split")
               if k in given}
    try:
        if doc.transformer is not None:
            t = doc.transformer.model_dump(exclude_unset=True)
            wl = transformer(name=w.name, mode=w.mode, strategy=str(strategy),
                             microbatches=w.microbatches, description=w.description, **t,
                             **options)
        else:
            layers = tuple(_layer(row, i) for i, row in enumerate(doc.layer))
            wl = Workload(name=w.name, layers=layers, mode=w.mode, strategy=strategy,
                          microbatches=w.microbatches, description=w.description, **options)
    except FredError as exc:
        text = str(exc)
        raise FredError(text if text.startswith(source) else f"{source}: {text}") from None
    return wl.with_(source=source)


def _layer(v: _Layer, index: int) -> Layer:
    where = f"layer {index} ({v.name})"
    gemms = tuple(_built(Gemm, g, f"{where}: gemms[{j}]") for j, g in enumerate(v.gemms))
    vectors = tuple(_built(VectorOp, x, f"{where}: vectors[{j}]") for j, x in enumerate(v.vectors))
    flops = sum(g.flops for g in gemms) if v.fwd_flops is None else v.fwd_flops
    return Layer(v.name, fwd_flops=flops, params=v.params, out_bytes=v.out_bytes,
                 in_bytes=v.in_bytes, stored_coeff=(v.stored_bytes, v.stored_bytes_sharded),
                 mp_allreduces=v.mp_allreduces, mp_shardable=v.mp_shardable,
                 gemms=gemms, vectors=vectors)


def _built(kind, entry, where):
    """``kind`` (Gemm, VectorOp) from a validated entry; its own checks (shard) name ``where``."""
    try:
        return kind(**entry.model_dump(exclude_unset=True))
    except FredError as exc:
        raise FredError(f"{where}: {exc}") from None


def workload_to_dict(wl: Workload) -> dict:
    """The workload-file document of ``wl`` as a layer table (what ``parse_workload`` reads)."""
    head = {"name": wl.name, "mode": wl.mode, "strategy": str(wl.strategy),
            "microbatches": wl.microbatches, "samples_per_dp": wl.samples_per_dp}
    if wl.description:
        head["description"] = wl.description
    for key, default in (("layers_on_wafer", 2), ("recompute", "auto"), ("sequence_parallel", False),
                         ("interleave", 1), ("dtype", "fp16"), ("pipeline_split", "flops")):
        if getattr(wl, key) != default:
            head[key] = getattr(wl, key)
    rows = []
    for layer in wl.layers:
        if layer.stored_core or layer.stored_sp:
            raise FredError(f"layer {layer.name}: attention-core / sequence-parallel activations "
                            f"have no layer-table form; write the model as [transformer]")
        row = {"name": layer.name, "params": layer.params, "in_bytes": layer.in_bytes,
               "out_bytes": layer.out_bytes, "stored_bytes": layer.stored_coeff[0],
               "stored_bytes_sharded": layer.stored_coeff[1], "mp_allreduces": layer.mp_allreduces}
        if not layer.mp_shardable:
            row["mp_shardable"] = False
        if not layer.gemms or abs(sum(g.flops for g in layer.gemms) - layer.fwd_flops) > 1e-9 * layer.fwd_flops:
            row["fwd_flops"] = layer.fwd_flops
        if layer.gemms:
            row["gemms"] = [_gemm_dict(g) for g in layer.gemms]
        if layer.vectors:
            row["vectors"] = [{"bytes": v.bytes, **({"shard": v.shard} if v.shard != "none" else {}),
                               **({"core": True} if v.core else {})} for v in layer.vectors]
        rows.append(row)
    return {"workload": head, "layer": rows}


def _gemm_dict(g: Gemm) -> dict:
    out = {"m": g.m, "n": g.n, "k": g.k}
    for key, default in (("count", 1), ("shard", "n"), ("merge", True), ("core", False)):
        if getattr(g, key) != default:
            out[key] = getattr(g, key)
    return out


def dump_toml(doc: dict, header: str = "") -> str:
    """A workload document as TOML (the subset this schema uses: tables, arrays of tables,
    numbers, strings, booleans, arrays of inline tables)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += ["", "[workload]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in doc["workload"].items()]
    if "transformer" in doc:
        lines += ["", "[transformer]"] + [f"{k} = {_toml_value(v)}" for k, v in doc["transformer"].items()]
    for row in doc.get("layer", []):
        lines += ["", "[[layer]]"] + [f"{k} = {_toml_value(v)}" for k, v in row.items()]
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 2 ** 53 else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise FredError(f"cannot write {v!r} as TOML")


def preset_path(name: str):
    """The shipped workload file of preset ``name`` (a ``Traversable``)."""
    return resources.files("sysmodel").joinpath("configs", "workloads", f"{name}.toml")


def get_workload(name: str) -> Workload:
    """A preset by name (one of :data:`WORKLOADS`, or any file shipped in
    ``configs/workloads/``), or a workload file by path (``.toml`` / ``.json``). A preset is read
    once per model cache (:mod:`sysmodel.model_cache`, ``workloads``); a file given by path is
    read every time (it may change between calls)."""
    key = str(name)
    presets = current().workloads
    if key in presets:
        return presets[key]
    shipped = preset_path(key) if "/" not in key and not key.endswith((".toml", ".json")) else None
    if shipped is not None and shipped.is_file():
        source = f"configs/workloads/{key}.toml"
        wl = parse_workload(parse_toml(shipped.read_text(), source), source=source)
    elif Path(key).suffix in (".toml", ".json") or Path(key).exists():
        wl = load_workload_file(key)
        return wl  # files may change between calls: not cached
    else:
        raise FredError(f"unknown workload {name!r}; available: {', '.join(WORKLOADS)}, or a "
                        f"workload file path (.toml / .json)")
    return presets.put(key, wl)
