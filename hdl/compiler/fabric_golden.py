"""The golden model of the fabric's fp16 data: what every NPU engine must receive, and its hash
(pure Python; docs/fabric_rtl.md).

fp16 sums depend on the order of the additions, so the fabric's fp16 runs are checked against
the order the hardware is configured to use, computed here with the bit-exact fp16 addition
of :mod:`hdl.contracts.dtypes` (the project's adder, ``hdl/designs/reduction/``, is pinned to it):

* in-switch collectives (Fred-B/D): a receiver gets its switch output's addition tree,
  composed across the fabric -- each switch's tree is read from its routed configuration
  (:func:`hdl.compiler.symbolic`, the phase that carries the collective), an L1 uplink
  input is the L2 output behind it, an L2 input the L1 output behind it -- and evaluated on
  the senders' data;
* endpoint algorithms (Fred-A/C: ring all-reduce, chains): each engine's output stream is
  computed as the engine computes it (own data, or the next received flit plus its own data,
  or the received flit alone; ``received + own`` with the received operand first), and a
  receiver gets its sender's stream.

The engine folds every received flit into a 32-bit hash (:func:`hdl.contracts.npu_engine.fold_hash`
on the flit's data word, lanes packed LSB first); :func:`expected_hashes` is the same fold over
the golden stream. Python never sees the flits of a run, only each engine's final hash.
"""

from __future__ import annotations

import numpy as np

from hdl.compiler import symbolic
from hdl.contracts.dtypes import get_dtype
from hdl.contracts.errors import FredError
from hdl.contracts.fabric import FabricRequest, FabricSpec
from hdl.contracts.npu_engine import MIX_CONSTANTS, fold_hash

__all__ = ["own_data", "received_streams", "endpoint_streams", "expected_hashes", "stream_hash"]

_M32 = np.uint64(0xFFFFFFFF)


def _mix(index: np.ndarray, lane: int) -> np.ndarray:
    """:func:`hdl.contracts.npu_engine.mix` on an array of indices (uint64 arithmetic, 32-bit)."""
    c1, c2, c3 = (np.uint64(c) for c in MIX_CONSTANTS)
    x = (index.astype(np.uint64) * c1 + ((np.uint64(lane + 1) * c2) & _M32)) & _M32
    x ^= x >> np.uint64(15)
    x = (x * c3) & _M32
    return x ^ (x >> np.uint64(12))


def own_data(weights: tuple[int, int], indices: np.ndarray, lanes: int) -> np.ndarray:
    """fp16 bit patterns (uint16, shape ``(len(indices), lanes)``) that data of ``weights``
    carries at ``indices`` (:func:`hdl.contracts.npu_engine.fp16_value`)."""
    w, h = (np.uint64(v) for v in weights)
    out = np.empty((len(indices), lanes), dtype=np.uint16)
    for lane in range(lanes):
        x = (w * _mix(np.asarray(indices), lane) + h) & _M32
        out[:, lane] = (((x >> np.uint64(31)) << np.uint64(15))
                        | ((((x >> np.uint64(26)) & np.uint64(3)) + np.uint64(13)) << np.uint64(10))
                        | ((x >> np.uint64(16)) & np.uint64(0x3FF))).astype(np.uint16)
    return out


def _indices(stage: dict, count: int, side: str) -> np.ndarray:
    """Data indices of a stage's first ``count`` output (``side="out"``) or input flits: chunks
    of ``chunk`` from ``org`` + base, the base stepping down by a chunk and wrapping from 0 to
    ``last_base`` (the engine's ``step``)."""
    t = np.arange(count, dtype=np.int64)
    chunk = stage["chunk"]
    base0 = stage["out_base" if side == "out" else "in_base"]
    period = stage["last_base"] + chunk
    base = (base0 - (t // chunk) * chunk) % period
    return stage["org"] + base + t % chunk


def _compose(spec: FabricSpec, program, switch: int, collective: int, port: int, memo: dict):
    """Addition tree (leaves: NPU ranks as ``("npu", r)``) arriving at output ``port`` of
    ``switch`` for ``collective``."""
    key = (switch, collective, port)
    if key in memo:
        return memo[key]
    phase = next((ph for ph in program.switches[switch] if collective in ph.collectives), None)
    if phase is None:
        raise FredError(f"collective {collective} has no phase on switch {program.switch_name(switch)}")
    trees, problems = symbolic(phase.config, present=phase.input_ports)
    if problems:
        raise FredError(f"switch {program.switch_name(switch)}: {'; '.join(problems)}")
    k, up, l1s = spec.npus_per_l1, spec.uplink_ports, spec.l1_count
    per_plane = up // spec.l2_planes

    def expand(tree):
        if isinstance(tree, tuple):
            return ("+", expand(tree[1]), expand(tree[2]))
        if switch < l1s:
            if tree < k:
                return ("npu", switch * k + tree)
            if tree >= k + up:
                # an I/O controller's port (io-broadcast's source): controller c sits on L1
                # c mod l1s at port k + up + c // l1s (FabricSpec.port_of)
                return ("npu", spec.npus + (tree - k - up) * l1s + switch)
            # an uplink input: what the L2 plane holding that uplink sends down it
            plane, local = spec.l2_plane_of(switch * up + (tree - k))
            return _compose(spec, program, l1s + plane, collective, local, memo)
        # an L2 plane's port: L1 j's uplink (plane x per_plane + local)
        j, local = divmod(tree, per_plane)
        return _compose(spec, program, j, collective, k + (switch - l1s) * per_plane + local, memo)

    if trees[port] is None:
        raise FredError(f"switch {program.switch_name(switch)} sends nothing to port {port} "
                        f"for collective {collective}")
    memo[key] = expand(trees[port])
    return memo[key]


def _evaluate(tree, data: dict, dtype) -> np.ndarray:
    if tree[0] == "npu":
        return data[tree[1]]
    return dtype.add(_evaluate(tree[1], data, dtype), _evaluate(tree[2], data, dtype))


def received_streams(spec: FabricSpec, request: FabricRequest, program) -> list[np.ndarray]:
    """Per endpoint (NPUs, then I/O controllers: an io-reduce's root receives the group's sum
    through its L1's controller port), the fp16 bit patterns (uint16, ``(flits, lanes)``) it
    must receive, in order."""
    dt = get_dtype(spec.dtype)
    lanes = spec.lanes
    empty = np.zeros((0, lanes), dtype=np.uint16)
    streams = [empty] * len(program.engines)
    if program.algorithm == "in-switch":
        memo: dict = {}
        size = request.size_flits
        data = {r: own_data((e["ws"], e["hs"]), np.arange(size), lanes)
                for r, e in enumerate(program.engines)}
        for index, coll in enumerate(request.collectives):
            receivers = coll.members if coll.op not in ("reduce", "io-reduce") else (coll.root,)
            for r in receivers:
                l1, port = spec.port_of(r)
                tree = _compose(spec, program, l1, index, port, memo)
                streams[r] = np.asarray(_evaluate(tree, data, dt), dtype=np.uint16).reshape(size, lanes)
        return streams
    return endpoint_streams(spec.dtype, lanes, program.engines)


def endpoint_streams(dtype: str, lanes: int, engines) -> list[np.ndarray]:
    """Per engine of an endpoint program (ring, chain, the mesh's hierarchical 2D all-reduce;
    each stage's ``sender`` an index into ``engines``), the fp16 bit patterns (uint16,
    ``(flits, lanes)``) it must receive, stage after stage: in each stage every engine's output
    stream as it computes it, a receiver getting its sender's.

    A stage's own data is its ``(ws, hs)`` data (:func:`own_data`), which is how the engine
    makes it (``hdl.designs.fabric.npu_engine.NpuEngine``): in a later stage the engine
    regenerates what it holds from the weights of the earlier stages' sum instead of keeping
    the sums it computed. In int32 that is the same number; in fp16 it is not the fp16 sum the
    earlier stage delivered, so a several-stage fp16 run checks every flit, every addition and
    its order, not the numerical all-reduce of the NPUs' data. So each stage is computed on its
    own, and an engine's received stream is its stages' streams in stage order (its receive
    side finishes a stage before the next, :class:`NpuEngine`)."""
    dt = get_dtype(dtype)
    streams = [np.zeros((0, lanes), dtype=np.uint16)] * len(engines)
    for s in range(max(len(e["stages"]) for e in engines)):
        stages = [e["stages"][s] if s < len(e["stages"]) else _NO_STAGE for e in engines]
        for r, got in enumerate(_stage_streams(dt, lanes, stages)):
            streams[r] = np.concatenate([streams[r], got])
    return streams


#: What an engine with fewer stages does in a later one: nothing.
_NO_STAGE = dict(send_count=0, recv_count=0)


def _stage_streams(dt, lanes: int, stages) -> list[np.ndarray]:
    """Per engine, what it receives in one stage (``stages[r]``: its registers)."""
    empty = np.zeros((0, lanes), dtype=np.uint16)
    streams = [empty] * len(stages)
    sent = [np.zeros((st["send_count"], lanes), dtype=np.uint16) for st in stages]
    done = [0] * len(stages)
    while any(done[r] < st["send_count"] for r, st in enumerate(stages)):
        progress = False
        for r, st in enumerate(stages):
            if done[r] >= st["send_count"]:
                continue
            sender = st.get("sender")
            available = done[sender] if sender is not None else 0
            limit = min(st["send_count"], st["own_only"] + min(available, st["fwd_count"]))
            if limit <= done[r]:
                continue
            t = np.arange(done[r], limit)
            own = own_data((st["ws"], st["hs"]), _indices(st, limit, "out")[done[r]:limit], lanes)
            values = own.copy()
            fwd = t >= st["own_only"]
            if fwd.any():
                received = sent[sender][t[fwd] - st["own_only"]]
                adding = (t[fwd] < st["add_until"])[:, None]
                values[fwd] = np.where(adding, dt.add(received, own[fwd]), received)
            sent[r][done[r]:limit] = values
            done[r] = limit
            progress = True
        if not progress:
            raise FredError("the fp16 golden model of the endpoint program makes no progress "
                            "(a dependency cycle without own data to start it)")
    for r, st in enumerate(stages):
        if st["recv_count"]:
            got = sent[st["sender"]]
            if len(got) != st["recv_count"]:
                raise FredError(f"NPU {r} expects {st['recv_count']} flits; its sender "
                                f"{st['sender']} sends {len(got)}")
            streams[r] = got
    return streams


def stream_hash(stream: np.ndarray) -> int:
    """The engine's hash of a received stream (uint16 ``(flits, lanes)``)."""
    lanes = stream.shape[1]
    words = sum(stream[:, lane].astype(np.uint64) << np.uint64(16 * lane) for lane in range(lanes))
    h = 0
    for word in words.tolist():
        h = fold_hash(h, int(word))
    return h


def expected_hashes(spec: FabricSpec, request: FabricRequest, program) -> list[int]:
    """Per endpoint (NPUs, then I/O controllers), the hash its engine must end with
    (:func:`stream_hash` of :func:`received_streams`)."""
    return [stream_hash(s) for s in received_streams(spec, request, program)]
