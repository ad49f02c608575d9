"""Imported workloads (docs/sysmodel.md, Fidelity): ASTRA-sim 1.0 text and Chakra execution traces, replayed with
their own compute times; small inputs written by the tests; malformed inputs named precisely."""

import json
import subprocess
import sys

import pytest

from hdl.contracts.errors import FredError
from sysmodel.astrasim import parse_astrasim
from sysmodel.chakra_trace import load_chakra
from sysmodel.collectives import Collective, evaluate
from sysmodel.platform import default_platform
from sysmodel.trace import replay

P = default_platform()


def astra(header, rows):
    return "\n".join([header, str(len(rows)), *rows]) + "\n"


def test_compute_only_workload_is_the_sum_of_its_times():
    text = astra("DATA", ["a -1 1000 NONE 0 2000 NONE 0 3000 NONE 0 0",
                          "b -1 10 NONE 0 20 NONE 0 30 NONE 0 5"])
    t = parse_astrasim(text, npus=20)
    r = replay(P, "fred-d", t)
    # forward a, b; backward b (wg, ig, update), a (wg, no ig for the first layer)
    assert r.time_s == pytest.approx((1000 + 10 + 30 + 20 + 3000 + 5) * 1e-9)
    assert r.breakdown["compute"] == pytest.approx(r.time_s)
    r2 = replay(P, "fred-d", parse_astrasim(text, npus=20, cycle_ns=2.0))
    assert r2.time_s == pytest.approx(2 * r.time_s)


def test_blocking_forward_collective_adds_its_fabric_time():
    text = astra("HYBRID_TRANSFORMER model_parallel_NPU_group: 4 all_gpus: 20",
                 ["a -1 1000 ALLREDUCE 1000000 0 NONE 0 0 NONE 0 0"])
    t = parse_astrasim(text)
    assert (t.npus, t.mp) == (20, 4)
    for fabric in ("mesh", "fred-d"):
        ar = evaluate(P, fabric, [Collective("all-reduce", g, 1e6) for g in t.groups("mp")]).time_s
        r = replay(P, fabric, t)
        assert r.time_s == pytest.approx(1000e-9 + ar, rel=1e-9)
        assert r.breakdown["mp"] == pytest.approx(ar, rel=1e-9)


def test_weight_gradient_collective_overlaps_the_input_gradient():
    text = astra("HYBRID_DATA_MODEL model_parallel_NPU_group: 2 all_gpus: 20",
                 ["a -1 0 NONE 0 0 NONE 0 0 NONE 0 0",
                  "b -1 0 NONE 0 5000000 NONE 0 0 ALLREDUCE 100000 0"])
    t = parse_astrasim(text)
    dp = evaluate(P, "mesh", [Collective("all-reduce", g, 1e5) for g in t.groups("dp")]).time_s
    assert dp < 5e-3
    r = replay(P, "mesh", t)
    assert r.time_s == pytest.approx(5e-3)          # hidden behind b's input gradient
    assert r.breakdown["dp"] == 0.0


@pytest.mark.parametrize("text, message", [
    ("DATAX\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", r"w\.txt:1: unknown parallelism type 'DATAX'"),
    ("DATA\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", r"w\.txt:2: says 2 layers but the file has 1"),
    ("DATA\n1\na -1 1 NONE 0 1 NONE 0 x NONE 0 0\n", r"w\.txt:3: column 9 \(wg_time\) must be a number"),
    ("DATA\n1\na -1 1 BCAST 0 1 NONE 0 1 NONE 0 0\n", r"w\.txt:3: column 4 \(fwd_comm\): unknown communication type 'BCAST'"),
    ("DATA\n1\na -1 1 NONE 0\n", r"w\.txt:3: a layer line has 12 columns"),
    ("HYBRID_TRANSFORMER pp: 2 all_gpus: 4 model_parallel_NPU_group: 2\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n",
     r"w\.txt:1: pipeline parallelism \(pp: 2\)"),
    ("HYBRID_TRANSFORMER all_gpus: 4\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n",
     r"w\.txt:1: HYBRID_TRANSFORMER needs model_parallel_NPU_group"),
    ("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 NONE 0 0\n", r"w\.txt: the header gives no all_gpus"),
])
def test_malformed_astrasim_files_name_line_and_column(text, message):
    with pytest.raises(FredError, match=message):
        parse_astrasim(text, source="w.txt", npus=None if "no all_gpus" in message else 4)


# -- Chakra ----------------------------------------------------------------------------------
def write_chakra(path, nodes):
    """Write a Chakra execution trace with the mlc-chakra schema: metadata, then ``nodes`` as
    (id, name, type name, duration_micros, deps, attrs) with attrs {name: int value}."""
    from chakra.schema.protobuf import et_def_pb2 as pb
    from chakra.src.third_party.utils.protolib import encodeMessage
    with open(path, "wb") as f:
        encodeMessage(f, pb.GlobalMetadata(version="0.0.4"))
        for nid, name, kind, micros, deps, attrs in nodes:
            node = pb.Node(id=nid, name=name, type=pb.NodeType.Value(kind), duration_micros=micros)
            node.data_deps.extend(deps)
            for key, value in attrs.items():
                if isinstance(value, str):
                    node.attr.append(pb.AttributeProto(name=key, string_val=value))
                else:
                    node.attr.append(pb.AttributeProto(name=key, int64_val=value))
            encodeMessage(f, node)


def test_chakra_trace_compute_collective_compute(tmp_path):
    from chakra.schema.protobuf import et_def_pb2 as pb
    for rank in range(20):   # the NPU count comes from the files <prefix>.<rank>.et
        write_chakra(tmp_path / f"trace.{rank}.et", [
            (1, "fwd", "COMP_NODE", 100, [], {}),
            (2, "grad all-reduce", "COMM_COLL_NODE", 0, [1],
             {"comm_type": pb.ALL_REDUCE, "comm_size": 4_000_000}),
            (3, "opt", "COMP_NODE", 50, [2], {}),
            (4, "side", "COMP_NODE", 7, [], {}),
        ])
    t = load_chakra(tmp_path / "trace.0.et")
    assert t.npus == 20 and len(t.nodes) == 4
    for fabric in ("mesh", "fred-d"):
        ar = evaluate(P, fabric, [Collective("all-reduce", tuple(range(20)), 4e6)]).time_s
        r = replay(P, fabric, t)
        assert r.time_s == pytest.approx(157e-6 + ar, rel=1e-9)


def test_chakra_send_receive_and_memory_nodes(tmp_path):
    write_chakra(tmp_path / "t.0.et", [
        (0, "send", "COMM_SEND_NODE", 0, [], {"comm_dst": 1, "comm_size": 1_000_000}),
        (1, "load", "MEM_LOAD_NODE", 0, [0], {"tensor_size": 1_000_000}),
        (2, "meta", "METADATA_NODE", 0, [1], {}),
    ])
    t = load_chakra(tmp_path / "t.0.et", npus=4)
    r = replay(P, "fred-d", t)
    assert r.time_s > 0 and r.breakdown["p2p"] > 0 and r.breakdown["io"] > 0


@pytest.mark.parametrize("nodes, message", [
    ([(1, "x", "COMP_NODE", 1, [9], {})], r"node 1 \(x\) depends on unknown node 9"),
    ([(1, "x", "COMM_COLL_NODE", 0, [], {"comm_type": 9, "comm_size": 1})],
     r"node 1 \(x\): collective BARRIER is not supported"),
    ([(1, "x", "COMM_COLL_NODE", 0, [], {"comm_type": 0})], r"node 1 \(x\): COMM_COLL_NODE needs the attribute 'comm_size'"),
    ([(1, "x", "COMM_COLL_NODE", 0, [], {"comm_type": 0, "comm_size": 1, "pg_name": "ep"})],
     r"node 1 \(x\): process group 'ep'"),
    ([(1, "x", "COMP_NODE", 1, [2], {}), (2, "y", "COMP_NODE", 1, [1], {})], r"dependency cycle through node 1 \(x\)"),
])
def test_malformed_chakra_traces_name_the_node(tmp_path, nodes, message):
    write_chakra(tmp_path / "bad.0.et", nodes)
    with pytest.raises(FredError, match=message):
        replay(P, "mesh", load_chakra(tmp_path / "bad.0.et", npus=4))


def test_not_a_chakra_file(tmp_path):
    bad = tmp_path / "junk.0.et"
    bad.write_bytes(b"\x05hello world")
    with pytest.raises(FredError, match="junk.0.et: .*(does not decode|not a Chakra)"):
        load_chakra(bad, npus=2)


def test_cli_replays_both_formats(tmp_path):
    (tmp_path / "w.txt").write_text(astra("DATA", ["a -1 1000 NONE 0 1000 NONE 0 1000 ALLREDUCE 1000000 0"]))
    proc = subprocess.run([sys.executable, "-m", "fred", "replay", str(tmp_path / "w.txt"), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["npus"] == 20 and set(out["speedup"]) == {"fred-a", "fred-b", "fred-c", "fred-d"}
    from chakra.schema.protobuf import et_def_pb2 as pb
    write_chakra(tmp_path / "c.0.et", [(1, "f", "COMP_NODE", 10, [], {}),
                                      (2, "ar", "COMM_COLL_NODE", 0, [1], {"comm_type": pb.ALL_REDUCE,
                                                                          "comm_size": 1000})])
    proc = subprocess.run([sys.executable, "-m", "fred", "replay", str(tmp_path / "c.0.et"), "--npus", "8",
                           "--fabric", "fred-d"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Chakra execution trace" in proc.stdout and "fred-d" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "fred", "replay", str(tmp_path / "missing.txt")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "does not exist" in proc.stderr
