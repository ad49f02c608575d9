"""Run independent points in process, in a local process pool, or on a Dask cluster (docs/sysmodel.md, Speed).

:func:`run_points` takes a top-level function and a list of plain-data specs (JSON-able
dicts; see :mod:`studies.points`) and returns one :class:`PointResult` per spec, in order:

* ``scheduler`` (``--scheduler ADDRESS``): the points run on the Dask distributed cluster at
  that address (``dask.distributed.Client``); the workers need this package installed and
  the files the specs name (platform, characterization, workload files) at the same paths;
* ``jobs`` > 1 (``--jobs N``): a local pool of N processes; with ``group`` (a function of a
  spec), the points whose specs give one value run in one worker, one after another, as one
  task, so that what they share in the model's caches (e.g. one fabric design's network and
  collective plans, :func:`studies.dse.dse_group`) is computed by one worker rather than by
  every worker that happens to take one of them (the pool hands out tasks in order, so
  consecutive points of one design went to both workers and both built its network);
* otherwise one after another in this process.

The same function computes every point wherever it runs, so the results do not depend on
where: only a row's own ``eval_s`` (its wall time) differs.

**Cache**: with ``cache`` (a JSON-lines file), every point is appended as soon as it is
computed, under its spec and ``version`` (the fingerprint of the code that computes it, e.g.
:func:`studies.points.model_fingerprint`); a later run with the same specs and version (an
interrupted run restarted, or a larger grid containing the old one) reads them back instead of
computing them again. A point cached by other code (the model changed since) is computed again.
**Failures**: a point whose function raises is returned with its ``error`` (the exception's
type and message) and is not cached, so a rerun retries it; the other points are unaffected.
Progress goes to a :mod:`fred.progress` bar.
"""

from __future__ import annotations

import gc
import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["PointResult", "run_points", "spec_key", "parse_jobs", "dask_calls", "point_groups"]


@dataclass
class PointResult:
    """One point: its ``spec``, the function's ``value`` (None on failure), ``error`` (None
    on success) and whether it came from the cache."""

    spec: dict
    value: object = None
    error: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def spec_key(spec: dict) -> str:
    """The cache key of a spec: its canonical JSON."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def parse_jobs(jobs) -> int:
    """``--jobs``: a positive integer, or 0 for one per CPU."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise FredError(f"--jobs must be an integer >= 0 (0: one per CPU), got {jobs!r}")
    return jobs or (os.cpu_count() or 1)


def guarded_group(fn, specs: list) -> list:
    """:func:`guarded` of each spec in turn, in one worker of a local pool (one task of a
    ``group``), then every object the worker holds frozen out of the cyclic garbage collector
    (``gc.freeze``). Why: the model's caches grow through a run, to millions of objects in a
    ``fred dse`` worker, and each full collection traverses all of them (3-5 % of a GPT-3
    grid's time; docs/sysmodel.md, Speed, thirty-third increment); what a task leaves alive is
    the caches and what they hold, and a point leaves no cyclic garbage
    (``tests/fred/test_parallel_points.py`` checks it for sweep and design-space points), so
    nothing freed later is kept. Reference counting still frees whatever a cache drops; the
    worker's objects go with it when the pool ends. Only the pool's workers freeze, never the
    calling process."""
    outcomes = [guarded(fn, spec) for spec in specs]
    gc.freeze()
    return outcomes


def point_groups(todo: list[int], specs: list[dict], group) -> list[list[int]]:
    """The indices ``todo`` of ``specs`` as tasks: one list per distinct ``group(spec)`` in the
    order of their first point, each in ``todo``'s order; without ``group``, one point each."""
    if group is None:
        return [[i] for i in todo]
    tasks: dict = {}
    for i in todo:
        tasks.setdefault(group(specs[i]), []).append(i)
    return list(tasks.values())


def guarded(fn, spec):
    """``fn(spec)`` as ("ok", value) or ("error", "Type: message"): runs in the worker, so that
    a failing point comes back as data instead of aborting the collection of the others."""
    try:
        return "ok", fn(spec)
    except Exception as exc:  # noqa: BLE001 -- reported per point, never lost
        return "error", f"{type(exc).__name__}: {exc}"


def _read_cache(path: Path, version: str | None) -> dict:
    done = {}
    if path.is_file():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if entry.get("version") == version:
                    done[entry["key"]] = entry["value"]
            except (json.JSONDecodeError, KeyError, TypeError):
                # a line cut short by an interrupted run: ignored, its point is recomputed
                continue
    return done


def run_points(fn, specs: list[dict], *, jobs: int = 1, scheduler: str | None = None,
               cache: str | Path | None = None, version: str | None = None, progress=None,
               connect_timeout_s: float = 20.0, group=None, prepare=None) -> list[PointResult]:
    """Compute ``fn(spec)`` for every spec (see the module docstring). ``version``: what the
    cached points must have been computed by (None: any point cached without a version);
    ``progress``: an object with ``update(n)`` (a :func:`fred.progress.progress_bar`), or None;
    ``connect_timeout_s``: how long to try reaching the scheduler; ``group``: a function of a
    spec whose equal values run in one worker of a local pool (a top-level function, or None:
    every point its own task). It changes where a point runs, never its value; a worker that
    dies fails every point of its task. ``prepare``: a function of no arguments run once in this
    process before a local pool starts (e.g. :func:`studies.points.prepare_model`: the model
    imported and its compiled code loaded, or compiled on a fresh clone), so that the forked
    workers inherit what it loaded instead of each loading (or compiling) it again; not run for
    points computed in this process (they load what they need as they run) or on a cluster."""
    results = [PointResult(spec) for spec in specs]
    keys = [spec_key(s) for s in specs]
    cache_path = Path(cache) if cache else None
    done = _read_cache(cache_path, version) if cache_path else {}
    todo = []
    for i, key in enumerate(keys):
        if key in done:
            results[i].value, results[i].cached = done[key], True
        else:
            todo.append(i)
    if progress is not None and len(todo) < len(specs):
        progress.update(len(specs) - len(todo))
    sink = open(cache_path, "a") if cache_path else None
    try:
        def record(i: int, outcome) -> None:
            status, payload = outcome
            if status == "ok":
                results[i].value = payload
                if sink is not None:
                    sink.write(json.dumps({"key": keys[i], "version": version, "value": payload},
                                          default=_json_default) + "\n")
                    sink.flush()
            else:
                results[i].error = payload
            if progress is not None:
                progress.update(1)

        if not todo:
            pass
        elif scheduler:
            _run_dask(fn, specs, todo, scheduler, record, connect_timeout_s)
        elif jobs > 1 and len(todo) > 1:
            if prepare is not None:
                prepare()
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = {pool.submit(guarded_group, fn, [specs[i] for i in task]): task
                           for task in point_groups(todo, specs, group)}
                for future in as_completed(futures):
                    task = futures[future]
                    try:
                        outcomes = future.result()
                    except Exception as exc:  # noqa: BLE001 -- a worker died: its points failed
                        outcomes = [("error", f"{type(exc).__name__}: {exc}")] * len(task)
                    for i, outcome in zip(task, outcomes):
                        record(i, outcome)
        else:
            for i in todo:
                record(i, guarded(fn, specs[i]))
    finally:
        if sink is not None:
            sink.close()
    return results


def _run_dask(fn, specs, todo, scheduler: str, record, timeout_s: float) -> None:
    calls = [(fn, (specs[i],)) for i in todo]
    for k, outcome in dask_calls(scheduler, calls, connect_timeout_s=timeout_s):
        record(todo[k], outcome)


def _call(function, arguments):
    """``function(*arguments)`` as ("ok", value) or ("error", "Type: message") (see :func:`guarded`)."""
    try:
        return "ok", function(*arguments)
    except Exception as exc:  # noqa: BLE001 -- reported per call, never lost
        return "error", f"{type(exc).__name__}: {exc}"


def dask_calls(scheduler: str, calls, *, connect_timeout_s: float = 20.0):
    """Run ``calls`` ((function, arguments) pairs; functions importable on the workers) on the
    Dask cluster at ``scheduler``; yield (index, ("ok", value) | ("error", message)) for each
    as it finishes. Used by :func:`run_points` and ``fred characterize --scheduler``."""
    try:
        from dask.distributed import Client, as_completed as dask_completed
    except ImportError as exc:   # pragma: no cover -- a dependency of the package
        raise FredError(f"--scheduler needs dask.distributed ({exc})") from None
    try:
        client = Client(scheduler, timeout=f"{connect_timeout_s}s")
    except (OSError, TimeoutError) as exc:
        raise FredError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    except (MemoryError, ValueError, EOFError) as exc:
        # something answers there but not Dask's protocol: its first bytes read as a frame length
        # ("Unable to allocate 3.07 EiB")
        raise FredError(f"--scheduler {scheduler}: the server there is not a Dask scheduler "
                        f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    try:
        futures = [client.submit(_call, function, tuple(arguments), pure=False) for function, arguments in calls]
        index = {f.key: i for i, f in enumerate(futures)}
        for future in dask_completed(futures):
            try:
                outcome = future.result()
            except Exception as exc:  # noqa: BLE001 -- a worker lost, a pickling error
                outcome = ("error", f"{type(exc).__name__}: {exc}")
            yield index[future.key], outcome
    finally:
        client.close()


def _json_default(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")
