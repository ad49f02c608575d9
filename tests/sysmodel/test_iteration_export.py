"""One training iteration exported as per-rank Chakra traces (docs/chakra_export.md): the files
hold the model's task graph, read back with mlc-chakra's own tools, and replaying them gives
the model's iteration time (exactly: the replay evaluates the same collectives, in the same
concurrent sets, on the same engine with the same dependencies and queues)."""

import json
import subprocess
import sys

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy
from sysmodel.chakra_trace import load_chakra_ranks
from sysmodel.chakra_writer import write_chakra_ranks
from sysmodel.iteration_export import export_iteration
from sysmodel.platform import default_platform
from sysmodel.rank_replay import replay_ranks
from sysmodel.trace import Trace, TraceNode
from sysmodel.training import simulate_iteration
from sysmodel.workload_file import get_workload

P = default_platform()
# a small pipelined case with every traffic class of a weight-stationary iteration: MP
# all-reduces, PP multicasts between two stages, DP gradient buckets (1 sample per microbatch)
T17 = dict(workload="transformer-17b", strategy=Strategy(mp=3, dp=3, pp=2), samples_per_dp=8)
# weight streaming: I/O weight streams as memory nodes on the wafer-wide I/O queues
GPT3 = dict(workload="gpt-3", strategy=Strategy(mp=2, dp=5, pp=2), samples_per_dp=2)


def _export(case, fabric, **kw):
    return export_iteration(P, fabric, get_workload(case["workload"]), case["strategy"],
                            samples_per_dp=case["samples_per_dp"], **kw)


def _traces(ranks):
    return {r: Trace(name=f"r{r}", nodes=nodes, npus=len(ranks)) for r, nodes in ranks.items()}


@pytest.mark.parametrize("case", [T17, GPT3], ids=["transformer-17b", "gpt-3"])
@pytest.mark.parametrize("fabric", ["mesh", "fred-d"])
def test_replayed_files_reproduce_the_model_iteration(case, fabric, tmp_path):
    ex = _export(case, fabric)
    model = simulate_iteration(P, fabric, get_workload(case["workload"]), case["strategy"],
                               samples_per_dp=case["samples_per_dp"])
    assert ex.time_s == pytest.approx(model.steady_time_s, rel=1e-12)   # the export runs the model
    paths = write_chakra_ranks(tmp_path, "it", ex.ranks)
    assert [p.name for p in paths] == [f"it.{r}.et" for r in range(case["strategy"].npus)]
    traces = load_chakra_ranks(paths[-1])
    assert all(traces[r].nodes == ex.ranks[r] for r in ex.ranks)       # nothing lost in the file
    result = replay_ranks(P, fabric, traces)
    assert result.time_s == pytest.approx(model.steady_time_s, rel=1e-9)
    for part in ("compute", "mp", "pp", "io", "dp", "bubble"):
        assert result.breakdown[part] == pytest.approx(model.breakdown[part], rel=1e-9, abs=1e-15)
    assert result.idle_npus == P.npus - case["strategy"].npus


def test_exported_graph_has_the_model_tasks_and_groups():
    ex = _export(T17, "mesh")
    s = T17["strategy"]
    stage_tasks = {0: 0, 1: 0}
    for rank, nodes in ex.ranks.items():
        mp, dp, pp = s.coords(rank)
        own = [n for n in nodes if n.kind != "recv"]
        if mp == 0 and dp == 0:
            stage_tasks[pp] = len(own)
        ids = {n.id for n in nodes}
        for n in nodes:
            assert set(n.deps) <= ids                     # dependencies inside the file
            if n.category == "mp":                        # this rank's MP group, MP class level
                assert n.op == "all-reduce" and n.priority == 2
                assert n.group == tuple(s.rank(mp=k, dp=dp, pp=pp) for k in range(3))
            if n.category == "dp":
                assert n.group == tuple(s.rank(mp=mp, dp=d, pp=pp) for d in range(3))
                assert n.priority == 0
            if n.category == "pp":     # from MP rank 0 of its replica to the other stage's MP group
                root = s.rank(mp=0, dp=dp, pp=pp)
                assert n.op == "multicast" and n.root == root and n.priority == 1
                assert n.group == tuple(sorted([root, *(s.rank(mp=k, dp=dp, pp=1 - pp) for k in range(3))]))
            if n.kind == "recv":                          # the other stage's send, by its id
                assert n.peer == s.rank(mp=0, dp=dp, pp=1 - pp)
                sent = {m.id: m for m in ex.ranks[n.peer]}[n.tag]
                assert sent.category == "pp" and n.size == sent.size
    assert stage_tasks[0] + stage_tasks[1] == ex.tasks    # every model task in one stage's files
    # stage 1's first forward layer waits for stage 0's first forward hand-over
    s1 = {n.id: n for n in ex.ranks[3]}
    first = next(n for n in ex.ranks[3] if n.kind == "compute")
    assert first.name.startswith("F0 s1")
    (recv,) = [s1[d] for d in first.deps]
    assert recv.kind == "recv" and {m.id: m for m in ex.ranks[0]}[recv.tag].name == "F0 s0 send"


def test_files_do_not_depend_on_the_fabric():
    assert _export(T17, "mesh").ranks == _export(T17, "fred-a").ranks


def test_scale_divides_compute_and_bytes():
    full, tenth = _export(T17, "fred-d"), _export(T17, "fred-d", scale=10)
    assert full.tasks == tenth.tasks
    for a, b in zip(full.ranks[4], tenth.ranks[4]):
        assert (a.id, a.kind, a.deps, a.group) == (b.id, b.kind, b.deps, b.group)
        assert b.duration_s == pytest.approx(a.duration_s / 10, rel=1e-12)
        assert b.size == pytest.approx(a.size / 10, rel=1e-12)
    # compute is exactly a tenth; communication less than a tenth shorter (latency is not scaled)
    assert tenth.breakdown["compute"] == pytest.approx(full.breakdown["compute"] / 10, rel=1e-12)
    assert full.time_s / 10 < tenth.time_s < full.time_s
    assert replay_ranks(P, "fred-d", _traces(tenth.ranks)).time_s == pytest.approx(tenth.time_s, rel=1e-9)
    with pytest.raises(FredError, match=r"scale must be a number in \[1, 1e9\]"):
        _export(T17, "mesh", scale=0.5)


def test_files_read_back_with_mlc_chakra_jsonizer(tmp_path):
    ex = _export(T17, "mesh", scale=100)
    (path,) = write_chakra_ranks(tmp_path, "it", {3: ex.ranks[3]})
    out = tmp_path / "rank3.json"
    proc = subprocess.run([sys.executable, "-m", "chakra.src.jsonizer.jsonizer", "--input_filename",
                           str(path), "--output_filename", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    decoder, text, objects, at = json.JSONDecoder(), out.read_text(), [], 0
    while at < len(text):          # the jsonizer writes one JSON object per message, concatenated
        obj, at = decoder.raw_decode(text, at)
        objects.append(obj)
        while at < len(text) and text[at].isspace():
            at += 1
    meta, nodes = objects[0], objects[1:]
    assert meta["version"] == "0.0.4" and len(nodes) == len(ex.ranks[3])
    types = {n["type"] for n in nodes}
    assert types == {"COMP_NODE", "COMM_COLL_NODE", "COMM_RECV_NODE"}
    coll = next(n for n in nodes if n["type"] == "COMM_COLL_NODE")
    attrs = {a["name"]: a for a in coll["attr"]}
    assert attrs["comm_type"]["int64Val"] in ("0", 0)          # ALL_REDUCE: an MP all-reduce
    assert attrs["pg_name"]["stringVal"] == "mp"
    assert [int(v) for v in attrs["comm_group"]["int64List"]["values"]] == [3, 4, 5]


def test_writing_beside_a_larger_earlier_set_is_refused(tmp_path):
    (tmp_path / "it.5.et").write_bytes(b"")
    nodes = [TraceNode(id=0, name="c", kind="compute", duration_s=1e-6)]
    with pytest.raises(FredError, match=r"already holds it\.5\.et of another trace set with prefix 'it'"):
        write_chakra_ranks(tmp_path, "it", {0: nodes, 1: nodes})
    assert len(write_chakra_ranks(tmp_path, "other", {0: nodes})) == 1


def test_receive_of_a_missing_node_is_named():
    nodes = {0: [TraceNode(id=0, name="c", kind="compute", duration_s=1e-6, queue="s0.compute")],
             1: [TraceNode(id=7, name="r", kind="recv", peer=0, tag=5),
                 TraceNode(id=1, name="c", kind="compute", duration_s=1e-6, deps=(7,))]}
    with pytest.raises(FredError, match=r"rank 1: receive node 7 \(r\) waits for node 5 of rank 0"):
        replay_ranks(P, "mesh", _traces(nodes))


@pytest.mark.full
@pytest.mark.parametrize("workload", ["resnet-152", "transformer-17b", "gpt-3", "transformer-1t"])
def test_every_paper_workload_round_trips_on_every_fabric(workload, tmp_path):
    """The paper's four workloads with their own strategy and minibatch, through the files."""
    wl = get_workload(workload)
    for fabric in P.fabrics:
        ex = export_iteration(P, fabric, wl)
        model = simulate_iteration(P, fabric, wl)
        assert ex.time_s == pytest.approx(model.steady_time_s, rel=1e-12)
        paths = write_chakra_ranks(tmp_path / fabric, "it", ex.ranks)
        replayed = replay_ranks(P, fabric, load_chakra_ranks(paths[0]))
        assert replayed.time_s == pytest.approx(model.steady_time_s, rel=1e-9)


def test_communication_timed_on_the_rtl_fabric_platform():
    """``network``: the RTL Fred-D fabric's platform times the collectives (the reference an RTL
    run of the files would be compared with); the compute times stay the workload platform's,
    and replaying on the RTL platform gives the exported time."""
    from hdl.contracts.fabric import fabric_spec
    from sysmodel.fabric_model import fabric_platform
    rtl, _ = fabric_platform(fabric_spec("fred-d"))
    case = dict(workload="resnet-152", strategy=Strategy(mp=1, dp=10, pp=2), samples_per_dp=2)
    on_rtl, on_paper = _export(case, "fred-d", network=rtl, scale=100), _export(case, "fred-d", scale=100)
    assert [n.duration_s for n in on_rtl.ranks[0]] == [n.duration_s for n in on_paper.ranks[0]]
    assert on_rtl.ranks == on_paper.ranks           # the files do not depend on the network
    assert on_rtl.time_s != on_paper.time_s         # the communication does
    assert replay_ranks(rtl, "fred-d", _traces(on_rtl.ranks)).time_s == pytest.approx(on_rtl.time_s, rel=1e-9)
    with pytest.raises(FredError, match="fabric"):
        _export(case, "mesh", network=rtl)
    with pytest.raises(FredError, match="gpt-3 streams its weights through the I/O controllers, "
                                        "but platform 'rtl-fred-d' has none"):
        _export(GPT3, "fred-d", network=rtl)


def test_a_foreign_trace_process_group_is_not_taken_for_a_traffic_class(tmp_path):
    """Only a node that names its group or queue (an exported one) has a traffic class; a
    collective of another trace with pg_name 'pp' is refused as before, not run on all NPUs."""
    from sysmodel.chakra_trace import load_chakra
    node = TraceNode(id=1, name="x", kind="comm", op="all-reduce", size=64.0, category="pp")
    write_chakra_ranks(tmp_path, "ok", {0: [node]})     # no group, no queue: a plain collective
    with pytest.raises(FredError, match=r"node 1 \(x\): process group 'pp' is not one of mp, tp, dp, all"):
        load_chakra(tmp_path / "ok.0.et", npus=4)


# MP and DP together, one stage: after the last backward layer its MP all-reduce and the DP
# all-reduce both wait only for that layer's compute
R152 = dict(workload="resnet-152", strategy=Strategy(mp=4, dp=5, pp=1), samples_per_dp=None)


def test_one_collective_chains_a_stages_collectives_and_the_model_times_that_schedule():
    free = _export(R152, "fred-d", overlap=False, scale=1000)
    one = _export(R152, "fred-d", overlap=False, scale=1000, one_collective=True)
    assert [n.id for n in one.ranks[0]] == [n.id for n in free.ranks[0]]    # the same tasks
    for ex, chained in ((free, False), (one, True)):
        nodes = ex.ranks[0]
        k = next(i for i, n in enumerate(nodes) if n.category == "dp")
        assert nodes[k - 1].category == "mp" and nodes[k - 2].kind == "compute"
        assert nodes[k - 2].id in nodes[k].deps and nodes[k - 2].id in nodes[k - 1].deps
        assert (nodes[k - 1].id in nodes[k].deps) is chained
    # the two collectives ran at once; now one after the other, each as long as before (their
    # groups share no link on Fred-D: an MP group is one L1's NPUs, a DP group one NPU per L1)
    replayed = replay_ranks(P, "fred-d", _traces(one.ranks))
    assert replayed.time_s == pytest.approx(one.time_s, rel=1e-9)     # the files hold the schedule
    assert one.comm_busy["dp"] == pytest.approx(free.comm_busy["dp"], rel=1e-9)
    assert one.comm_busy["mp"] == pytest.approx(free.comm_busy["mp"], rel=1e-9)
    # one task at a time: the iteration is its compute plus all of its communication; before,
    # the DP all-reduce hid under the last MP all-reduce (or the other way round)
    parts = one.breakdown["compute"] + one.comm_busy["mp"] + one.comm_busy["dp"]
    assert one.time_s == pytest.approx(parts, rel=1e-9)
    assert free.time_s < parts - 0.25 * one.comm_busy["dp"]     # here 75 of the DP's 195 ns hid


def test_one_collective_overlapped_chains_the_collectives_under_the_compute():
    # weight streaming on one stage: loads prefetched under the compute, gradients stored out
    case = dict(workload="gpt-3", strategy=Strategy(mp=1, dp=20, pp=1), samples_per_dp=8)
    free = _export(case, "mesh", scale=10_000)
    one = _export(case, "mesh", scale=10_000, one_collective=True)
    serial = _export(case, "mesh", overlap=False, scale=10_000, one_collective=True)

    def chained(ex):     # each collective (or marker of a class) waits for the one added before it
        comm = [n for n in ex.ranks[0] if n.kind != "compute" and n.category]
        return all(before.id in after.deps for before, after in zip(comm, comm[1:]))

    assert chained(one) and not chained(free)    # loads and stores on two queues, at once
    replayed = replay_ranks(P, "mesh", _traces(one.ranks))
    assert replayed.time_s == pytest.approx(one.time_s, rel=1e-9)     # the files hold the schedule
    # the same communication; overlapped, one collective at a time hides part of it (here a
    # third), all of it when the collectives may run at once, none serialised
    assert one.comm_busy["io"] == pytest.approx(serial.comm_busy["io"], rel=1e-9)
    assert serial.breakdown["io"] == pytest.approx(serial.comm_busy["io"], rel=1e-9)
    assert free.breakdown["io"] < 0.05 * one.breakdown["io"] < 0.05 * serial.breakdown["io"]
    assert free.time_s < one.time_s < serial.time_s
    assert one.time_s == pytest.approx(one.breakdown["compute"] + one.breakdown["io"], rel=1e-9)


def test_one_collective_on_header_selected_switches_selects_only_when_the_program_changes():
    """Hand-made runs on one stage: program X once, X three times (a repeat), Y, X. A packet
    switch keeps its phase selected, so only the first run after another program (or the
    first of the iteration) pays the header select: 10 + 3 x 8 + 20 + 10 (select 2 and 5)."""
    from sysmodel.iteration_export import _DescribedCommTime, _RecordingEngine
    eng = _RecordingEngine(blocking=True, one_collective=True)
    x, y = frozenset({("L1", "x", 1)}), frozenset({("L1", "y", 1)})
    runs = [_DescribedCommTime(10.0, selected=x, select_s=2.0), _DescribedCommTime(10.0, selected=x, select_s=2.0) * 3,
            _DescribedCommTime(20.0, selected=y, select_s=5.0), _DescribedCommTime(10.0, selected=x, select_s=2.0)]
    assert [eng._without_repeated_selects(0, r).time_s for r in runs] == [10.0, 24.0, 20.0, 10.0]
    # no stored program (online unicasts, several phases, start-selected switches): unchanged
    assert eng._without_repeated_selects(0, _DescribedCommTime(10.0) * 2).time_s == 20.0
    assert eng._without_repeated_selects(0, runs[3]).time_s == 10.0     # after none: selects again


def test_packet_platform_iteration_pays_one_header_select_per_program_change():
    """resnet-152 MP20 on the packet Fred-B, one collective at a time: every MP all-reduce is
    the wafer-wide in-switch program, so the iteration's communication is the runs' times, each
    as ``evaluate`` times it alone (its header selects included), less a select for every run
    but the first. On the circuit platform (selects at the start, by the sequencers) every
    run is timed alone."""
    from hdl.contracts.fabric import fabric_spec
    from sysmodel.collectives import Collective, evaluate
    from sysmodel.fabric_model import fabric_platform
    case = dict(workload="resnet-152", strategy=Strategy(mp=20, dp=1, pp=1), samples_per_dp=None)
    for switch in ("packet", "circuit"):
        net, _ = fabric_platform(fabric_spec("fred-b"), switch=switch)
        ex = _export(case, "fred-b", network=net, overlap=False, scale=1000, one_collective=True)
        alone, runs, selects = 0.0, 0, set()
        for node in ex.ranks[0]:
            if node.kind == "comm":
                r = evaluate(net, "fred-b", [Collective(node.op, node.group, node.size / node.repeat)])
                assert r.algorithms == ["in-switch"] and r.phases == 1
                alone += node.repeat * r.time_s
                runs += node.repeat
                selects.add(r.phase_overhead_s)
        assert runs > 100 and len(selects) == 1
        select = selects.pop() if switch == "packet" else 0.0
        assert ex.comm_busy["mp"] == pytest.approx(alone - (runs - 1) * select, rel=1e-9)
        assert select > 0 or switch == "circuit"
