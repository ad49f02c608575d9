"""Per-rank node lists written as Chakra execution traces (docs/chakra_export.md).

:func:`write_chakra_ranks` writes ``<folder>/<prefix>.<rank>.et`` per rank in the
``mlc-chakra`` protobuf schema (``chakra.schema.protobuf.et_def_pb2``; a ``GlobalMetadata``
then ``Node`` messages, each prefixed by its varint length), the format
:mod:`sysmodel.chakra_trace` reads. Standard Chakra fields carry what other Chakra consumers
read (``duration_micros``, ``comm_type``, ``comm_size`` and ``tensor_size`` in whole units,
``comm_src`` / ``comm_dst``, ``comm_tag``, ``pg_name``, ``comm_priority``); the exact values and
what Chakra has no field for are extra attributes: ``duration_seconds`` and ``fred_comm_size``
(exact floats; a scaled iteration has fractional microseconds and bytes), ``comm_group`` (the
ranks of the rank's group), ``comm_root``, ``fred_op`` (the model's collective: a ``multicast``
is written as a Chakra BROADCAST over its root and the receiving group, I/O streams as memory
nodes), ``fred_repeat`` (back-to-back repetitions; ``comm_size`` is their total) and
``fred_queue`` (the NPU resource running the node).
"""

from __future__ import annotations

from pathlib import Path

from hdl.contracts.errors import FredError
from sysmodel.chakra_trace import COLLECTIVES

__all__ = ["write_chakra_ranks", "CHAKRA_SCHEMA_VERSION"]

#: The schema version written in the files' metadata (mlc-chakra 1.0.0's).
CHAKRA_SCHEMA_VERSION = "0.0.4"
_CHAKRA_TYPE = {model: chakra for chakra, model in COLLECTIVES.items()}
_CHAKRA_TYPE["multicast"] = "BROADCAST"


def _attr(pb, name: str, value):
    if isinstance(value, str):
        return pb.AttributeProto(name=name, string_val=value)
    if isinstance(value, float):
        return pb.AttributeProto(name=name, double_val=value)
    if isinstance(value, tuple):
        return pb.AttributeProto(name=name, int64_list=pb.Int64List(values=list(value)))
    return pb.AttributeProto(name=name, int64_val=int(value))


def _comm_attrs(node) -> dict:
    attrs = {"fred_comm_size": float(node.size)}
    if node.group:
        attrs["comm_group"] = tuple(node.group)
    if node.root is not None:
        attrs["comm_root"] = node.root
    if node.fred_op:
        attrs["fred_op"] = node.fred_op
    if node.repeat != 1.0:
        attrs["fred_repeat"] = float(node.repeat)
    return attrs


def _message(pb, node):
    """The Chakra ``Node`` of a :class:`sysmodel.trace.TraceNode`."""
    attrs: dict = {}
    micros = 0
    if node.kind == "compute":
        kind, micros = "COMP_NODE", round(node.duration_s * 1e6)
        attrs["duration_seconds"] = float(node.duration_s)
    elif node.kind == "comm":
        if node.op not in _CHAKRA_TYPE:
            raise FredError(f"node {node.id} ({node.name}): collective {node.op!r} has no Chakra type")
        kind = "COMM_COLL_NODE"
        attrs.update(comm_type=pb.CollectiveCommType.Value(_CHAKRA_TYPE[node.op]),
                     comm_size=round(node.size), **_comm_attrs(node))
    elif node.kind in ("mem-read", "mem-write"):
        kind = "MEM_LOAD_NODE" if node.kind == "mem-read" else "MEM_STORE_NODE"
        attrs.update(tensor_size=round(node.size), **_comm_attrs(node))
    elif node.kind in ("p2p", "recv"):
        kind = "COMM_SEND_NODE" if node.kind == "p2p" else "COMM_RECV_NODE"
        attrs.update({"comm_dst" if node.kind == "p2p" else "comm_src": node.peer,
                      "comm_size": round(node.size), "fred_comm_size": float(node.size)})
        if node.tag is not None:
            attrs["comm_tag"] = node.tag
    elif node.kind == "marker":
        kind = "METADATA_NODE"
    else:
        raise FredError(f"node {node.id} ({node.name}): kind {node.kind!r} has no Chakra node type")
    for key, value in (("pg_name", node.category), ("comm_priority", node.priority),
                       ("fred_queue", node.queue)):
        if value is not None:
            attrs[key] = value
    message = pb.Node(id=node.id, name=node.name, type=pb.NodeType.Value(kind),
                      duration_micros=micros)
    message.data_deps.extend(node.deps)
    message.attr.extend(_attr(pb, k, v) for k, v in attrs.items())
    return message


def write_chakra_ranks(folder, prefix: str, ranks: dict, *, description: str = "") -> list[Path]:
    """Write ``ranks`` (rank -> [TraceNode]) as ``<folder>/<prefix>.<rank>.et``; returns the
    paths. ``description``: a line kept in each file's metadata (``fred_description``)."""
    from chakra.schema.protobuf import et_def_pb2 as pb
    from chakra.src.third_party.utils.protolib import encodeMessage
    folder = Path(folder)
    if not prefix or "/" in prefix or prefix.startswith("."):
        raise FredError(f"trace prefix {prefix!r} must be a plain file-name prefix")
    folder.mkdir(parents=True, exist_ok=True)
    # a replay reads every <prefix>.<rank>.et of the folder: files of a larger earlier set would
    # be read with this one
    stale = sorted(p.name for p in folder.glob(f"{prefix}.*.et")
                   if p.name[len(prefix) + 1:-3].isdigit() and int(p.name[len(prefix) + 1:-3]) not in ranks)
    if stale:
        raise FredError(f"{folder} already holds {', '.join(stale[:4])}{' ...' if len(stale) > 4 else ''} "
                        f"of another trace set with prefix {prefix!r}; remove them or choose another prefix")
    paths = []
    for rank in sorted(ranks):
        path = folder / f"{prefix}.{rank}.et"
        meta = pb.GlobalMetadata(version=CHAKRA_SCHEMA_VERSION)
        meta.attr.extend([_attr(pb, "fred_rank", rank), _attr(pb, "fred_ranks", len(ranks)),
                          _attr(pb, "fred_description", description)])
        with open(path, "wb") as handle:
            encodeMessage(handle, meta)
            for node in ranks[rank]:
                encodeMessage(handle, _message(pb, node))
        paths.append(path)
    return paths
