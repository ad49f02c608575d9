"""Points (docs/sysmodel.md, Speed) run in process, in a process pool and on a Dask LocalCluster give the same
results; computed points are cached; a failing point is reported, not lost."""

from __future__ import annotations

import json
import os

import pytest

from fred.parallel import run_points, spec_key
from fred.progress import Silent, wanted
from studies.points import platform_ref, sweep_point, sweep_specs


def _specs():
    return sweep_specs("resnet-152", "fred-d", platform_ref(), samples_per_dp=16, overlap=True)


def _values(results):
    # eval_s is each point's own wall time: the one field that depends on where it ran
    return [{k: v for k, v in r.value.items() if k != "eval_s"} for r in results]


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


def test_pool_and_local_cluster_equal_the_local_run(cluster):
    specs = _specs()
    local = run_points(sweep_point, specs)
    assert all(r.ok and not r.cached for r in local)
    pooled = run_points(sweep_point, specs, jobs=2)
    assert _values(pooled) == _values(local)
    on_dask = run_points(sweep_point, specs, scheduler=cluster.scheduler_address)
    assert _values(on_dask) == _values(local)
    assert [r.spec for r in on_dask] == specs


def test_characterize_tasks_on_a_cluster_share_the_seed_and_report_failures(cluster):
    """``fred characterize --scheduler``: each task runs on a worker with the run's FRED_SEED
    (a worker does not inherit this environment); a failing task comes back as an error."""
    import os
    from fred.commands.characterize import _run_tasks
    tasks = [("probe", None, "timing", os.getenv, ("FRED_SEED",)),
             ("broken", None, "timing", int, ("not a number",))]
    out = dict(_run_tasks(tasks, 1, lambda *a: None, scheduler=cluster.scheduler_address, seed=4242))
    assert out[0] == "4242"
    assert isinstance(out[1], Exception) and "invalid literal" in str(out[1])


def test_cache_reuses_points_and_failures_are_reported_not_cached(tmp_path):
    cache = tmp_path / "points.jsonl"
    specs = _specs()[:3]
    bad = {**specs[0], "workload": "no-such-workload"}   # an unknown workload raises in the worker
    first = run_points(sweep_point, [*specs, bad], cache=cache)
    assert [r.ok for r in first] == [True, True, True, False]
    assert "no-such-workload" in first[3].error and first[3].value is None
    lines = cache.read_text().splitlines()
    assert len(lines) == 3 and {json.loads(line)["key"] for line in lines} == {spec_key(s) for s in specs}

    class Count:
        n = 0

        def update(self, k):
            self.n += k
    counter = Count()
    again = run_points(sweep_point, [*specs, bad], cache=cache, progress=counter)
    assert [r.cached for r in again] == [True, True, True, False]
    assert [r.value for r in again[:3]] == [r.value for r in first[:3]]   # read back as computed
    assert counter.n == 4
    assert not again[3].ok                              # retried, still failing, still reported


def test_a_cut_short_cache_line_is_recomputed(tmp_path):
    cache = tmp_path / "points.jsonl"
    specs = _specs()[:2]
    run_points(sweep_point, specs, cache=cache)
    text = cache.read_text().splitlines()
    cache.write_text(text[0] + "\n" + text[1][: len(text[1]) // 2])   # an interrupted write
    again = run_points(sweep_point, specs, cache=cache)
    assert [r.cached for r in again] == [True, False] and all(r.ok for r in again)


def test_points_cached_by_another_model_are_recomputed(tmp_path):
    """A cache entry keeps the fingerprint of the model that computed it: after a model change
    (another version) the point is computed again, never read back stale."""
    from studies.points import model_fingerprint
    cache = tmp_path / "points.jsonl"
    specs = _specs()[:2]
    first = run_points(sweep_point, specs, cache=cache, version=model_fingerprint())
    assert {json.loads(line)["version"] for line in cache.read_text().splitlines()} == {model_fingerprint()}
    same = run_points(sweep_point, specs, cache=cache, version=model_fingerprint())
    assert all(r.cached for r in same) and [r.value for r in same] == [r.value for r in first]
    other = run_points(sweep_point, specs, cache=cache, version="an older model")
    assert not any(r.cached for r in other) and all(r.ok for r in other)
    assert len(model_fingerprint()) == 16 and model_fingerprint() == model_fingerprint()


def test_bad_parallel_options_are_named():
    from hdl.contracts.errors import FredError
    from fred.parallel import parse_jobs
    with pytest.raises(FredError, match="--jobs"):
        parse_jobs(-1)
    assert parse_jobs(3) == 3 and parse_jobs(0) >= 1
    with pytest.raises(FredError, match="Dask scheduler"):
        run_points(sweep_point, _specs()[:1], scheduler="tcp://127.0.0.1:9", connect_timeout_s=1)


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("FRED_PROGRESS", raising=False)
    assert not wanted(json_output=True)

    class Tty:
        def isatty(self):
            return True
    monkeypatch.setattr("sys.stderr", Tty())
    assert wanted(stream=Tty()) and not wanted(json_output=True, stream=Tty())
    monkeypatch.setenv("FRED_PROGRESS", "0")
    assert not wanted(stream=Tty())
    monkeypatch.setenv("FRED_PROGRESS", "1")
    assert wanted(json_output=True)
    s = Silent(3)
    s.update(2)
    assert s.n == 2


def test_a_terminal_gets_a_bar_with_counts_and_time_remaining():
    """On a terminal (a pty that reports no size, as in CI) `fred sweep` draws its bar:
    description, count done/total and the elapsed<remaining times; with --json it draws none."""
    import os
    import pty
    import sys

    def on_pty(*argv) -> str:
        pid, fd = pty.fork()
        if pid == 0:   # the child: the command on the pty
            env = {k: v for k, v in os.environ.items() if k != "FRED_PROGRESS"}
            os.execve(sys.executable, [sys.executable, "-m", "fred", *argv], env)
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        return out.decode(errors="replace")
    text = on_pty("sweep", "--workload", "resnet-152", "--fabric", "fred-d")
    assert "sweep resnet-152 fred-d:" in text and "18/18 [" in text and "<" in text.split("18/18 [")[1][:20]
    assert "sweep resnet-152 fred-d:" not in on_pty("sweep", "--workload", "resnet-152", "--fabric", "fred-d", "--json")


def test_off_a_terminal_eval_logs_its_steps_and_json_is_quiet():
    """Not on a terminal: `fred eval` logs its steps on stderr (a CI log), with --json nothing."""
    import subprocess
    import sys
    import os
    env = {k: v for k, v in os.environ.items() if k != "FRED_PROGRESS"}
    base = [sys.executable, "-m", "fred", "eval", "--no-files", "--no-diagnostic", "--uncertainty-samples", "0"]
    log = subprocess.run(base, capture_output=True, text=True, env=env)
    assert log.returncode == 0 and "[3/4] strategy sweeps" in log.stderr and "speedup over the 2D mesh" in log.stdout
    quiet = subprocess.run([*base, "--json"], capture_output=True, text=True, env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_point_groups_keep_the_first_appearance_order():
    from fred.parallel import point_groups
    specs = [{"d": d} for d in "abacbd"]
    assert point_groups([0, 1, 2, 3, 4, 5], specs, lambda s: s["d"]) == [[0, 2], [1, 4], [3], [5]]
    assert point_groups([1, 2, 5], specs, lambda s: s["d"]) == [[1], [2], [5]]
    assert point_groups([3, 0], specs, None) == [[3], [0]]


def test_dse_points_grouped_by_design_in_a_pool_equal_the_local_run():
    """``fred dse``'s points run as one task per design group (studies.dse.dse_group: a
    design and its other-m twin) in a pool of two: every value equals the run in process,
    in spec order, and the groups are what the docstring says."""
    from fred.parallel import point_groups
    from studies.cost import load_cost_model
    from studies.dse import DseGrid, dse_group, dse_point, dse_specs
    from studies.points import platform_from_ref
    ref = platform_ref()
    grid = DseGrid(npus_per_l1=(5, 10), l1_l2_fraction=(0.25,), in_switch=(False,), middle=(2, 3),
                   chiplet_ports=(8,))
    designs = grid.designs(platform_from_ref(ref), load_cost_model(None).reference)
    specs = dse_specs("resnet-152", ref, designs, samples_per_dp=16, overlap=True,
                      strategies=["MP1-DP20-PP1", "MP2-DP10-PP1", "MP1-DP10-PP2"])
    groups = point_groups(list(range(len(specs))), specs, dse_group)
    for task in groups:        # one group: the same design but for m
        assert len({(specs[i]["design"]["npus_per_l1"], specs[i]["design"]["in_switch"],
                     specs[i]["design"]["l1_l2_fraction"]) for i in task}) == 1
    assert len(groups) < len(designs)
    local = run_points(dse_point, specs)
    pooled = run_points(dse_point, specs, jobs=2, group=dse_group)
    assert [r.spec for r in pooled] == specs
    assert all(r.ok for r in pooled) and _values(pooled) == _values(local)


def _counted_prepare(calls: list):
    def prepare():
        calls.append(os.getpid())
    return prepare


def test_prepare_runs_once_in_this_process_before_a_pool_and_never_in_process():
    """``run_points(prepare=)`` (fred dse, fred sweep: studies.points.prepare_model) runs in the
    parent once, before the pool forks, so the workers inherit what it loaded; points computed
    in this process need no preparing."""
    specs = _specs()[:3]
    calls: list = []
    pooled = run_points(sweep_point, specs, jobs=2, prepare=_counted_prepare(calls))
    assert calls == [os.getpid()] and all(r.ok for r in pooled)
    calls.clear()
    local = run_points(sweep_point, specs, prepare=_counted_prepare(calls))
    assert calls == [] and _values(local) == _values(pooled)


def test_prepare_model_loads_the_compiled_code():
    from studies.points import prepare_model
    from sysmodel.stage_schedule_compiled import _schedule_time
    prepare_model()
    assert _schedule_time.signatures     # loaded (or compiled) for the arrays the model passes


#: Run in a fresh interpreter by the test below (a process whose other threads -- a Dask
#: cluster's event loop, say -- make garbage of their own would blur the count): prints, as
#: JSON, the unreachable objects found after the points with fresh caches, and after emptying
#: each bounded cache.
_GARBAGE_LEFT = """
import gc, json, sys
from studies.cost import load_cost_model
from studies.dse import DseGrid, dse_point, dse_specs
from studies.points import platform_from_ref, platform_ref, sweep_point, sweep_specs
from sysmodel.model_cache import ModelCache, using
workload = sys.argv[1]
ref = platform_ref()
grid = DseGrid(npus_per_l1=(4, 20), l1_l2_fraction=(0.25,), in_switch=(False, True), middle=(2,),
               chiplet_ports=(16,))
designs = grid.designs(platform_from_ref(ref), load_cost_model(None).reference)
points = [(dse_point, s) for s in dse_specs(workload, ref, designs, samples_per_dp=16, overlap=True,
                                            strategies=["MP1-DP20-PP1", "MP4-DP5-PP1", "MP2-DP5-PP2"])]
points += [(sweep_point, s) for s in sweep_specs(workload, "fred-d", ref, samples_per_dp=16,
                                                 overlap=True)[:6]]
for fn, spec in points:     # the first pass: whatever a first use makes once
    fn(spec)
gc.collect()
gc.disable()
cache = ModelCache()
found = {}
with using(cache):
    for fn, spec in points:
        fn(spec)
    found["points"] = gc.collect()
    found["kept"] = [len(cache.networks), len(cache.comm_times), len(cache.graph_templates)]
    for name, memo in cache.memos().items():
        if name != "networks":
            memo.clear()
            found[name] = gc.collect()
print(json.dumps(found))
"""


@pytest.mark.parametrize("workload", ["gpt-3", "transformer-17b"])
def test_sweep_and_design_points_leave_no_cyclic_garbage(workload):
    """What a pool worker relies on when it freezes its heap after each task
    (fred.parallel.guarded_group): sweep and design-space points, computed with fresh model
    caches after a first pass over the same points (code paths warmed), leave nothing that
    only the cyclic collector would free, and neither does emptying any bounded cache (a memo
    empties itself when full): only the networks, which the unbounded ``networks`` memo keeps
    for the process's life, hold cycles. A change that makes a point or a bounded cache's
    entries cyclic would grow every worker's frozen heap, and fails here."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", _GARBAGE_LEFT, workload], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "PYTHONPATH": root}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(found.pop("kept")), "the points filled no networks, timings or graph templates"
    assert found["points"] == 0
    assert {name: n for name, n in found.items() if n} == {}
