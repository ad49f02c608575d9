"""Chakra execution traces as traces (docs/sysmodel.md, Fidelity).

A Chakra execution trace (MLCommons; the ``mlc-chakra`` package's protobuf schema
``chakra.schema.protobuf.et_def_pb2``) is one file per rank, ``<prefix>.<rank>.et``: a
``GlobalMetadata`` message and then ``Node`` messages, each prefixed by its length as a
varint (``chakra.src.third_party.utils.protolib``). This reads one rank's file (every rank is
assumed to run the same graph) into a :class:`sysmodel.trace.Trace`:

* ``COMP_NODE``: compute for ``duration_micros``; a node without a duration but with a
  ``num_ops`` attribute runs those operations at ``npu.peak_tflops x npu.compute_efficiency``
  (needs ``peak_flops``, else an error naming the node);
* ``COMM_COLL_NODE``: attributes ``comm_type`` (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER,
  ALL_TO_ALL, BROADCAST, REDUCE) and ``comm_size`` (bytes), over all NPUs of the trace, or the
  model-/data-parallel groups when the node's ``pg_name`` attribute is ``mp``/``tp`` or ``dp``;
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: a transfer of ``comm_size`` bytes with the peer
  (``comm_dst`` / ``comm_src``);
* ``MEM_LOAD_NODE`` / ``MEM_STORE_NODE``: ``tensor_size`` bytes read from / written to
  external memory (through the I/O controllers);
* ``METADATA_NODE``: no time (keeps its dependencies).

Dependencies are ``data_deps`` and ``ctrl_deps``. A malformed file or node is an error naming
the file, the node's id and name, and what is wrong.

Traces exported by the system model (:mod:`sysmodel.iteration_export`, docs/chakra_export.md)
name each collective's group explicitly and carry what the model needs to replay them exactly;
these attributes are read into the node's fields (:class:`sysmodel.trace.TraceNode`):
``comm_group`` (int64 list), ``comm_root``, ``comm_priority``, ``comm_tag`` (a receive's
matching node), ``fred_op``, ``fred_repeat``, ``fred_queue``, ``duration_seconds`` (exact;
``duration_micros`` is whole microseconds) and ``pg_name`` as the traffic class.
"""

from __future__ import annotations

from pathlib import Path

from hdl.contracts.errors import FredError
from sysmodel.trace import Trace, TraceNode

__all__ = ["load_chakra", "load_chakra_ranks", "COLLECTIVES"]

#: Chakra CollectiveCommType name -> the model's collective.
COLLECTIVES = {"ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather",
               "REDUCE_SCATTER": "reduce-scatter", "ALL_TO_ALL": "all-to-all",
               "BROADCAST": "broadcast", "REDUCE": "reduce"}
_GROUPS = {"mp": "mp", "tp": "mp", "dp": "dp", "all": "all"}
#: Traffic classes of a node whose group is explicit (``comm_group``).
_CLASSES = ("mp", "pp", "dp", "io")


def _schema():
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError as exc:   # pragma: no cover - a dependency of the project
        raise FredError(f"reading Chakra traces needs the mlc-chakra package ({exc})") from None
    return et_def_pb2, protolib


def _attrs(node) -> dict:
    out = {}
    for a in node.attr:
        which = a.WhichOneof("value")
        value = getattr(a, which) if which else None
        out[a.name] = tuple(value.values) if which and which.endswith("_list") else value
    return out


def load_chakra(path: str | Path, *, npus: int | None = None, mp: int = 1,
                peak_flops: float | None = None) -> Trace:
    """A :class:`Trace` from one rank's Chakra file. ``npus``: NPUs running the trace
    (default: the number of ``<prefix>.<rank>.et`` files beside it); ``mp``: model-parallel
    group size for nodes whose ``pg_name`` is ``mp``/``tp``/``dp``."""
    path = Path(path)
    if not path.is_file():
        raise FredError(f"Chakra trace {path} does not exist")
    pb, protolib = _schema()
    if npus is None:
        parts = path.name.rsplit(".", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2] == "et":
            npus = len(list(path.parent.glob(f"{parts[0]}.*.et")))
        else:
            raise FredError(f"{path}: the NPU count is not given and the file is not named "
                            f"<prefix>.<rank>.et: give --npus")
    names = {v.number: v.name for v in pb.NodeType.DESCRIPTOR.values}
    comm_names = {v.number: v.name for v in pb.CollectiveCommType.DESCRIPTOR.values}
    nodes: list[TraceNode] = []
    with open(path, "rb") as handle:
        meta = pb.GlobalMetadata()
        try:
            ok = protolib.decodeMessage(handle, meta)
        except Exception as exc:  # noqa: BLE001 - protobuf raises its own DecodeError
            raise FredError(f"{path}: not a Chakra trace: the global metadata does not decode "
                            f"({exc})") from None
        if not ok:
            raise FredError(f"{path}: empty file, not a Chakra trace")
        index = 0
        while True:
            node = pb.Node()
            try:
                ok = protolib.decodeMessage(handle, node)
            except Exception as exc:  # noqa: BLE001
                raise FredError(f"{path}: message {index + 1} after the metadata does not decode as "
                                f"a Chakra node ({exc})") from None
            if not ok:
                break
            index += 1
            nodes.append(_node(node, names, comm_names, path, peak_flops))
    if not nodes:
        raise FredError(f"{path}: the trace has no nodes")
    version = getattr(meta, "version", "")
    return Trace(name=path.name, nodes=nodes, npus=npus, mp=mp,
                 source=f"{path} (Chakra execution trace{', schema ' + version if version else ''})")


def load_chakra_ranks(path: str | Path, *, mp: int = 1, peak_flops: float | None = None) -> dict:
    """{rank: Trace} of every ``<prefix>.<rank>.et`` beside ``path`` (one of them); the ranks
    must be 0..n-1."""
    path = Path(path)
    parts = path.name.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit() or parts[2] != "et":
        raise FredError(f"{path}: a per-rank trace set is named <prefix>.<rank>.et")
    files = {}
    for f in path.parent.glob(f"{parts[0]}.*.et"):
        rank = f.name[len(parts[0]) + 1:-3]
        if rank.isdigit():
            files[int(rank)] = f
    missing = sorted(set(range(max(files, default=-1) + 1)) - set(files))
    if missing or not files:
        raise FredError(f"{path}: the ranks of {parts[0]}.<rank>.et must be 0..n-1; missing "
                        f"{', '.join(map(str, missing[:8])) or 'all'}")
    return {r: load_chakra(f, npus=len(files), mp=mp, peak_flops=peak_flops)
            for r, f in sorted(files.items())}


def _explicit(attrs, where, need) -> dict:
    """The fields of an exported node (its group named explicitly; module docstring)."""
    out = {}
    group = attrs.get("comm_group")
    if group is not None:
        if not isinstance(group, tuple) or not all(isinstance(r, int) and r >= 0 for r in group):
            raise FredError(f"{where}: attribute 'comm_group' must be a list of ranks >= 0")
        out["group"] = group
    for key, field in (("comm_root", "root"), ("comm_priority", "priority"), ("comm_tag", "tag")):
        if key in attrs:
            out[field] = int(need(key))
    if "fred_repeat" in attrs:
        repeat = need("fred_repeat")
        if not repeat > 0:
            raise FredError(f"{where}: attribute 'fred_repeat' must be > 0, got {repeat!r}")
        out["repeat"] = float(repeat)
    for key, field in (("fred_op", "fred_op"), ("fred_queue", "queue")):
        if key in attrs:
            if not isinstance(attrs[key], str) or not attrs[key]:
                raise FredError(f"{where}: attribute {key!r} must be a non-empty string")
            out[field] = attrs[key]
    pg = attrs.get("pg_name")
    # an exported node (its group or queue named) gives its traffic class; any other node's
    # process group is checked where it is used (a collective's dimension)
    if pg is not None and (group is not None or "queue" in out):
        if pg not in _CLASSES:
            raise FredError(f"{where}: traffic class (pg_name) {pg!r} is not one of "
                            f"{', '.join(_CLASSES)}")
        out["category"] = pg
    return out


def _node(node, names, comm_names, path, peak_flops) -> TraceNode:
    attrs = _attrs(node)
    kind = names.get(node.type, f"type {node.type}")
    where = f"{path}: node {node.id} ({node.name or 'unnamed'})"
    deps = tuple(dict.fromkeys(list(node.data_deps) + list(node.ctrl_deps)))

    def need(key):
        if key not in attrs or attrs[key] is None:
            raise FredError(f"{where}: {kind} needs the attribute {key!r}")
        value = attrs[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise FredError(f"{where}: attribute {key!r} must be a number >= 0, got {value!r}")
        return value

    def size(key):   # the exact bytes of an exported node, else the Chakra field
        return float(need("fred_comm_size" if "fred_comm_size" in attrs else key))

    base = dict(id=int(node.id), name=node.name or f"node{node.id}", deps=deps,
                **_explicit(attrs, where, need))
    if kind == "COMP_NODE":
        if "duration_seconds" in attrs:
            return TraceNode(kind="compute", duration_s=float(need("duration_seconds")), **base)
        if node.duration_micros:
            return TraceNode(kind="compute", duration_s=node.duration_micros * 1e-6, **base)
        if "num_ops" in attrs:
            if not peak_flops:
                raise FredError(f"{where}: has num_ops but no duration; give the platform's speed")
            return TraceNode(kind="compute", duration_s=need("num_ops") / peak_flops, **base)
        return TraceNode(kind="compute", duration_s=0.0, **base)
    if kind == "COMM_COLL_NODE":
        ctype = need("comm_type")
        cname = comm_names.get(int(ctype), f"type {ctype}")
        if cname not in COLLECTIVES:
            raise FredError(f"{where}: collective {cname} is not supported; expected one of "
                            f"{', '.join(COLLECTIVES)}")
        group = attrs.get("pg_name", "all") or "all"
        dim = "all" if "group" in base else _GROUPS.get(group)
        if dim is None:
            raise FredError(f"{where}: process group {group!r} is not one of {', '.join(_GROUPS)}")
        return TraceNode(kind="comm", op=base.get("fred_op") or COLLECTIVES[cname], size=size("comm_size"),
                         dim=dim, **base)
    if kind in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
        peer = need("comm_dst" if kind == "COMM_SEND_NODE" else "comm_src")
        return TraceNode(kind="p2p" if kind == "COMM_SEND_NODE" else "recv",
                         size=size("comm_size"), peer=int(peer), **base)
    if kind in ("MEM_LOAD_NODE", "MEM_STORE_NODE"):
        return TraceNode(kind="mem-read" if kind == "MEM_LOAD_NODE" else "mem-write",
                         op=base.get("fred_op"), size=size("tensor_size"), **base)
    if kind == "METADATA_NODE":
        return TraceNode(kind="marker", **base)
    raise FredError(f"{where}: unsupported node type {kind}")
