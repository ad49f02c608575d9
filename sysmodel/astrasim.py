"""ASTRA-sim 1.0 text workloads as traces (docs/sysmodel.md, Fidelity).

The format (ASTRA-sim 1.0 ``Workload.cc``; also what Chakra's ``text_converter`` reads):

* line 1: the parallelism type -- ``DATA``, ``MODEL``, ``HYBRID_DATA_MODEL``,
  ``HYBRID_MODEL_DATA``, ``HYBRID_TRANSFORMER``, ``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` or
  ``MICRO`` -- optionally followed by ``key: value`` pairs; read here:
  ``model_parallel_NPU_group: N`` (the MP group size), ``all_gpus: N`` (NPUs), ``pp: N``
  (pipeline stages; only 1 is supported); others are recorded in the notes and ignored;
* line 2: the number of layers;
* one line per layer: ``name reserved fwd_time fwd_comm fwd_size ig_time ig_comm ig_size
  wg_time wg_comm wg_size update_time`` -- compute times in cycles (``cycle_ns``, default 1 ns:
  ASTRA-sim's 1 GHz tick), communication sizes in bytes, communication types ``NONE``,
  ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``, ``ALLTOALL``.

The graph follows ASTRA-sim 1.0's schedule: forward layer by layer, each layer's forward
collective blocking the next layer; backward from the last layer, per layer the weight-gradient
compute, its collective issued without blocking, then the input-gradient compute (none for
the first layer) and its blocking collective; each layer's weight update (``update_time``)
after its weight-gradient collective. The forward and input-gradient collectives run on the
model-parallel groups and the weight-gradient ones on the data-parallel groups for the
hybrid types; on all NPUs for ``DATA``, ``MODEL`` and ``MICRO`` (``MICRO``: only the
weight-gradient collectives, as Chakra's converter does).
"""

from __future__ import annotations

from pathlib import Path

from hdl.contracts.errors import FredError
from sysmodel.trace import Trace, TraceNode

__all__ = ["load_astrasim", "parse_astrasim", "PARALLELISM", "COMM_TYPES"]

PARALLELISM = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER",
               "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "MICRO")
COMM_TYPES = {"NONE": None, "ALLREDUCE": "all-reduce", "ALLGATHER": "all-gather",
              "REDUCESCATTER": "reduce-scatter", "ALLTOALL": "all-to-all"}
_COLUMNS = ("name", "reserved", "fwd_time", "fwd_comm", "fwd_size", "ig_time", "ig_comm",
            "ig_size", "wg_time", "wg_comm", "wg_size", "update_time")


def load_astrasim(path: str | Path, *, npus: int | None = None, cycle_ns: float = 1.0) -> Trace:
    path = Path(path)
    if not path.is_file():
        raise FredError(f"ASTRA-sim workload {path} does not exist")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise FredError(f"{path}: not a text file (an ASTRA-sim 1.0 workload is text; Chakra "
                        f"traces end in .et)") from None
    return parse_astrasim(text, source=str(path), npus=npus, cycle_ns=cycle_ns)


def parse_astrasim(text: str, *, source: str = "<astra-sim>", npus: int | None = None,
                   cycle_ns: float = 1.0) -> Trace:
    """A :class:`Trace` from ASTRA-sim 1.0 workload text; errors name the file, the line and
    the column. ``npus``: NPUs running it (default: the header's ``all_gpus``, else required).

    Steps, each checking its own part of the file in file order (so the first error reported
    is the first one in the file): the header line (:func:`_header`, :func:`_header_values`),
    the layer count (:func:`_layer_count`), the layer lines (:func:`_layer`), then the task
    graph (:func:`_schedule`)."""
    if not cycle_ns > 0:
        raise FredError(f"cycle length must be > 0 ns, got {cycle_ns!r}")
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if len(lines) < 2:
        raise FredError(f"{source}: an ASTRA-sim workload needs a header line, a layer count and "
                        f"layer lines")
    (hline, header), (cline, count) = lines[0], lines[1]
    kind, keys = _header(header, f"{source}:{hline}")
    npus, mp, notes = _header_values(kind, keys, npus, source, f"{source}:{hline}")
    n_layers = _layer_count(count, f"{source}:{cline}")
    rows = lines[2:]
    if len(rows) != n_layers:
        raise FredError(f"{source}:{cline}: says {n_layers} layers but the file has {len(rows)} "
                        f"layer lines")
    layers = [_layer(line, number, source, cycle_ns) for number, line in rows]
    return Trace(name=Path(source).stem if source != "<astra-sim>" else "astra-sim",
                 nodes=_schedule(kind, layers), npus=npus, mp=mp,
                 source=f"{source} (ASTRA-sim 1.0 text, {kind})", notes=notes)


def _header(header: str, where: str) -> tuple[str, dict[str, list[str]]]:
    """(parallelism type, ``{key: [value tokens]}``) of the header line ``header``; ``where``
    (``file:line``) prefixes the errors. A key is a token ending in ``:``; its values are the
    tokens up to the next key (at least one). A repeated key keeps its first position and its
    last values."""
    tokens = header.split()
    kind = tokens[0]
    if kind not in PARALLELISM:
        raise FredError(f"{where}: unknown parallelism type {kind!r}; expected one of "
                        f"{', '.join(PARALLELISM)}")
    keys, j = {}, 1
    while j < len(tokens):
        key = tokens[j]
        if not key.endswith(":") or j + 1 >= len(tokens):
            raise FredError(f"{where}: expected 'key: value' pairs after {kind}, got {key!r}")
        values = []
        j += 1
        while j < len(tokens) and not tokens[j].endswith(":"):
            values.append(tokens[j])
            j += 1
        keys[key[:-1]] = values
    return kind, keys


#: The header keys :func:`_header_values` reads (each a positive integer); others are noted.
_HEADER_KEYS = ("model_parallel_NPU_group", "all_gpus", "pp")


def _header_values(kind: str, keys: dict[str, list[str]], npus: int | None, source: str,
                   where: str) -> tuple[int, int, list[str]]:
    """(NPUs, model-parallel group size, notes) from the header's ``keys`` (in header order).
    ``npus``: the caller's NPU count (None: the header's ``all_gpus``, which must then be
    there); ``DATA``, ``MODEL`` and ``MICRO`` fix the group size (1; all NPUs for ``MODEL``),
    the hybrid types need ``model_parallel_NPU_group``. ``source`` / ``where`` (``file`` /
    ``file:line``) prefix the errors."""
    mp, notes = 1, []
    for key, values in keys.items():
        if key not in _HEADER_KEYS:
            notes.append(f"header key {key} ignored")
            continue
        value = _positive_header_int(key, values, where)
        if key == "model_parallel_NPU_group":
            mp = value
        elif key == "all_gpus" and npus is None:
            npus = value
        elif key == "pp" and value != 1:
            raise FredError(f"{where}: pipeline parallelism (pp: {value}) in ASTRA-sim "
                            f"text workloads is not supported; use a workload file")
    if npus is None:
        raise FredError(f"{source}: the header gives no all_gpus: give the NPU count (--npus)")
    if kind in ("DATA", "MODEL", "MICRO"):
        mp = 1 if kind != "MODEL" else npus
    elif mp == 1 and "model_parallel_NPU_group" not in keys:
        raise FredError(f"{where}: {kind} needs model_parallel_NPU_group: N in the header")
    return npus, mp, notes


def _positive_header_int(key: str, values: list[str], where: str) -> int:
    """The header key ``key``'s first value token as a positive integer."""
    try:
        value = int(values[0])
        if value < 1:
            raise ValueError
    except (ValueError, IndexError):
        raise FredError(f"{where}: {key} must be a positive integer, got "
                        f"{' '.join(values)!r}") from None
    return value


def _layer_count(count: str, where: str) -> int:
    """The second line, ``count``, as a positive integer (the number of layer lines)."""
    try:
        n_layers = int(count.strip())
        if n_layers < 1:
            raise ValueError
    except ValueError:
        raise FredError(f"{where}: the layer count must be a positive integer, got "
                        f"{count.strip()!r}") from None
    return n_layers


def _schedule(kind: str, layers: list[dict]) -> list[TraceNode]:
    """The task graph of ASTRA-sim 1.0's schedule (module docstring) of the parsed ``layers``
    (:func:`_layer`) for parallelism type ``kind``: forward layer by layer (none for
    ``MICRO``), then backward from the last layer. A collective of type ``NONE`` or size 0 is
    left out, and what would have depended on it depends on its compute instead."""
    nodes: list[TraceNode] = []

    def add(name, kind_, deps, **kw) -> int:
        nodes.append(TraceNode(id=len(nodes), name=name, kind=kind_,
                               deps=tuple(d for d in deps if d is not None), **kw))
        return len(nodes) - 1

    def comm(layer, phase, deps):
        op, size = layer[f"{phase}_comm"], layer[f"{phase}_size"]
        if op is None or size <= 0:
            return None
        return add(f"{layer['name']} {phase} {op}", "comm", deps, op=op, size=size,
                   dim=_comm_dim(kind, phase))

    prev = None
    if kind != "MICRO":
        for layer in layers:
            prev = add(f"{layer['name']} fwd", "compute", [prev], duration_s=layer["fwd_time"])
            prev = comm(layer, "fwd", [prev]) or prev
    for index in reversed(range(len(layers))):
        layer = layers[index]
        if kind == "MICRO":
            prev = comm(layer, "wg", [prev]) or prev
            continue
        wg = add(f"{layer['name']} wg", "compute", [prev], duration_s=layer["wg_time"])
        wg_comm = comm(layer, "wg", [wg])
        if layer["update_time"] > 0:
            add(f"{layer['name']} update", "compute", [wg_comm or wg], duration_s=layer["update_time"])
        prev = wg
        if index > 0:
            prev = add(f"{layer['name']} ig", "compute", [wg], duration_s=layer["ig_time"])
            prev = comm(layer, "ig", [prev]) or prev
    return nodes


def _comm_dim(kind: str, phase: str) -> str:
    """The NPU groups a ``phase`` (``fwd``, ``ig``, ``wg``) collective runs on: all NPUs for
    ``DATA``, ``MODEL`` and ``MICRO``; else the data-parallel groups for the weight gradients
    and the model-parallel ones for the rest."""
    if kind in ("DATA", "MODEL", "MICRO"):
        return "all"
    return "dp" if phase == "wg" else "mp"


def _layer(line: str, number: int, source: str, cycle_ns: float) -> dict:
    cols = line.split()
    if len(cols) < len(_COLUMNS):
        raise FredError(f"{source}:{number}: a layer line has {len(_COLUMNS)} columns "
                        f"({' '.join(_COLUMNS)}), this one {len(cols)}")
    out = {"name": cols[0]}
    for i, column in enumerate(_COLUMNS[2:], start=2):
        value = cols[i]
        if column.endswith("_comm"):
            if value not in COMM_TYPES:
                raise FredError(f"{source}:{number}: column {i + 1} ({column}): unknown "
                                f"communication type {value!r}; expected {', '.join(COMM_TYPES)}")
            out[column] = COMM_TYPES[value]
            continue
        try:
            number_value = float(value)
            if number_value < 0 or number_value != number_value:
                raise ValueError
        except ValueError:
            raise FredError(f"{source}:{number}: column {i + 1} ({column}) must be a number >= 0, "
                            f"got {value!r}") from None
        out[column] = number_value * cycle_ns * 1e-9 if column.endswith("_time") else number_value
    return out
