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
import math
import tomllib
from importlib import resources
from pathlib import Path

from hdl.contracts.errors import FredError
from hdl.contracts.placement import parse_strategy
from sysmodel.compute import Gemm, VectorOp
from sysmodel.toml_file import parse_toml
from sysmodel.workloads import WORKLOADS, Layer, Workload, transformer

__all__ = ["get_workload", "preset_path", "load_workload_file", "parse_workload", "workload_to_dict", "dump_toml"]

_WORKLOAD_KEYS = {"name": str, "mode": str, "strategy": str, "microbatches": int,
                  "samples_per_dp": int}
_WORKLOAD_OPTIONAL = {"description": str, "sources": str, "layers_on_wafer": int,
                      "recompute": str, "sequence_parallel": bool, "interleave": int, "dtype": str,
                      "pipeline_split": str}
_TRANSFORMER_KEYS = {"layers": int, "hidden": int, "heads": int, "seq": int, "vocab": int}
_TRANSFORMER_OPTIONAL = {"ffn": int}
_LAYER_KEYS = {"name": str, "params": float, "in_bytes": float, "out_bytes": float}
_LAYER_OPTIONAL = {"stored_bytes": float, "stored_bytes_sharded": float, "mp_allreduces": int,
                   "mp_shardable": bool, "fwd_flops": float, "gemms": list, "vectors": list}
_GEMM_KEYS = {"m", "n", "k", "count", "shard", "merge", "core"}
_VECTOR_KEYS = {"bytes", "shard", "core"}


def load_workload_file(path: str | Path) -> Workload:
    """A :class:`Workload` from a ``.toml`` or ``.json`` workload file."""
    path = Path(path)
    if not path.is_file():
        raise FredError(f"workload file {path} does not exist")
    text = path.read_text()
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
    if not isinstance(data, dict):
        raise FredError(f"{source}: the document must be a table")
    for key in data:
        if key not in ("workload", "transformer", "layer"):
            raise FredError(f"{source}: unknown table {key!r} (expected workload, transformer "
                            f"or layer)")
    if "workload" not in data:
        raise FredError(f"{source}: missing table [workload]")
    w = _table(data["workload"], "[workload]", _WORKLOAD_KEYS, _WORKLOAD_OPTIONAL, source)
    has_t, has_l = "transformer" in data, "layer" in data
    if has_t == has_l:
        raise FredError(f"{source}: give exactly one of [transformer] (hyper-parameters) or "
                        f"[[layer]] (a layer table)")
    try:
        strategy = parse_strategy(w["strategy"])
    except FredError as exc:
        raise FredError(f"{source}: workload.strategy: {exc}") from None
    options = {k: w[k] for k in ("layers_on_wafer", "recompute", "sequence_parallel", "interleave",
                                 "dtype", "samples_per_dp", "pipeline_split") if k in w}
    description = w.get("description", "")
    for key in ("microbatches", "samples_per_dp", "layers_on_wafer", "interleave"):
        if key in w and w[key] < 1:
            raise FredError(f"{source}: workload.{key} must be a positive integer, got {w[key]}")
    try:
        if has_t:
            t = _table(data["transformer"], "[transformer]", _TRANSFORMER_KEYS,
                       _TRANSFORMER_OPTIONAL, source)
            wl = transformer(name=w["name"], mode=w["mode"], strategy=str(strategy),
                             microbatches=w["microbatches"], description=description, **t,
                             **options)
        else:
            rows = data["layer"]
            if not isinstance(rows, list) or not rows:
                raise FredError("[[layer]] must be a non-empty array of tables")
            layers = tuple(_layer(row, i) for i, row in enumerate(rows))
            wl = Workload(name=w["name"], layers=layers, mode=w["mode"], strategy=strategy,
                          microbatches=w["microbatches"], description=description, **options)
    except FredError as exc:
        text = str(exc)
        raise FredError(text if text.startswith(source) else f"{source}: {text}") from None
    return wl.with_(source=source)


def _table(table, where, required, optional, source) -> dict:
    at = f"{source}: {where}" if source else where
    if not isinstance(table, dict):
        raise FredError(f"{at} must be a table")
    out = {}
    for key, value in table.items():
        kind = required.get(key) or optional.get(key)
        if kind is None:
            raise FredError(f"{at}: unknown key {key!r}")
        out[key] = _typed(value, kind, f"{at}.{key}")
    for key in required:
        if key not in table:
            raise FredError(f"{at}: missing key {key!r}")
    return out


def _typed(value, kind, where):
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0:
            raise FredError(f"{where} must be a number >= 0, got {value!r}")
        return float(value)
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FredError(f"{where} must be an integer, got {value!r}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise FredError(f"{where} must be true or false, got {value!r}")
        return value
    if not isinstance(value, kind):
        raise FredError(f"{where} must be a {kind.__name__}, got {value!r}")
    return value


def _layer(row, index) -> Layer:
    name = row.get("name", "?") if isinstance(row, dict) else "?"
    where = f"layer {index} ({name})"
    if not isinstance(row, dict):
        raise FredError(f"{where} must be a table")
    v = _table(row, where, _LAYER_KEYS, _LAYER_OPTIONAL, "")
    gemms = tuple(_gemm(g, f"{where}: gemms[{j}]") for j, g in enumerate(v.get("gemms", [])))
    vectors = tuple(_vector(x, f"{where}: vectors[{j}]") for j, x in enumerate(v.get("vectors", [])))
    flops = v.get("fwd_flops", sum(g.flops for g in gemms))
    return Layer(v["name"], fwd_flops=flops, params=v["params"], out_bytes=v["out_bytes"],
                 in_bytes=v["in_bytes"],
                 stored_coeff=(v.get("stored_bytes", 0.0), v.get("stored_bytes_sharded", 0.0)),
                 mp_allreduces=v.get("mp_allreduces", 2), mp_shardable=v.get("mp_shardable", True),
                 gemms=gemms, vectors=vectors)


def _gemm(g, where) -> Gemm:
    if not isinstance(g, dict):
        raise FredError(f"{where} must be a table {{m, n, k, ...}}")
    for key in g:
        if key not in _GEMM_KEYS:
            raise FredError(f"{where}: unknown key {key!r} (expected {', '.join(sorted(_GEMM_KEYS))})")
    for key in ("m", "n", "k"):
        if key not in g:
            raise FredError(f"{where}: missing key {key!r}")
    try:
        return Gemm(**g)
    except (FredError, TypeError) as exc:
        raise FredError(f"{where}: {exc}") from None


def _vector(x, where) -> VectorOp:
    if not isinstance(x, dict) or "bytes" not in x:
        raise FredError(f"{where} must be a table with bytes (and optional shard, core)")
    for key in x:
        if key not in _VECTOR_KEYS:
            raise FredError(f"{where}: unknown key {key!r}")
    try:
        return VectorOp(**x)
    except (FredError, TypeError) as exc:
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


#: Presets read from their shipped files, by name (files given by path are read every time).
_CACHE: dict = {}


def preset_path(name: str):
    """The shipped workload file of preset ``name`` (a ``Traversable``)."""
    return resources.files("sysmodel").joinpath("configs", "workloads", f"{name}.toml")


def get_workload(name: str) -> Workload:
    """A preset by name (one of :data:`WORKLOADS`, or any file shipped in
    ``configs/workloads/``), or a workload file by path (``.toml`` / ``.json``)."""
    key = str(name)
    if key in _CACHE:
        return _CACHE[key]
    shipped = preset_path(key) if "/" not in key and not key.endswith((".toml", ".json")) else None
    if shipped is not None and shipped.is_file():
        wl = parse_workload(tomllib.loads(shipped.read_text()),
                            source=f"configs/workloads/{key}.toml")
    elif Path(key).suffix in (".toml", ".json") or Path(key).exists():
        wl = load_workload_file(key)
        return wl  # files may change between calls: not cached
    else:
        raise FredError(f"unknown workload {name!r}; available: {', '.join(WORKLOADS)}, or a "
                        f"workload file path (.toml / .json)")
    _CACHE[key] = wl
    return wl
