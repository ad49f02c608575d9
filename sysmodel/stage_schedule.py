"""Time of concurrent chains of dependent stages that share links (a fluid schedule).

A *chain* is a list of stages that run one after another (each needs the previous one's
result); chains run concurrently. A stage is ``(duration_s, link_s)``: what it takes alone at
full speed, and the time each link is busy with its bytes (``link_s[l] <= duration_s``; the
rest of the duration is latency the link time does not hide). The hierarchical 2D mesh
all-reduce is two such chains (the rows-first and the columns-first chunk,
``sysmodel.collectives``): summing their loads as if every stage overlapped every other
(``Traffic.then`` + busiest link) is optimistic, because a chunk's stages each load one
dimension's links only, and the chunks meet on the same links when their stages drift apart.

Model: while a stage is running it advances at a fraction ``theta`` (0 < theta <= 1) of its
full speed and occupies ``theta * link_s[l] / duration_s`` of each link l. The running stages'
``theta`` are max-min fair (progressive filling: all rise together until a link is full, the
stages using that link stop rising): two stages on the same links each get half of them, as
the RTL router's round-robin output allocation gives two backlogged virtual channels
(docs/mesh_rtl.md). When a stage finishes, its chain's next stage starts. The result is the
time the last chain finishes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["Stage", "chains_time", "chains_time_reference", "link_classes"]

#: (duration alone at full speed in s, busy time of each link in s)
Stage = tuple[float, np.ndarray]

#: A share below which a link counts as unused / a stage's speed as full.
EPS = 1e-12
#: The fraction of a stage left below which it is done.
DONE = 1e-9


def link_classes(chains: Sequence[Sequence[Stage]]) -> list[list[Stage]]:
    """The same chains with links that every stage loads identically merged into one column
    (the schedule only sees which stages share a link and how much): a 2D all-reduce on a
    mesh has a few such classes, however many links it has; the result is the same."""
    stages = [s for chain in chains for s in chain]
    if not stages:
        return [list(c) for c in chains]
    matrix = np.stack([np.asarray(link_s, dtype=float) for _, link_s in stages])
    columns = np.unique(matrix, axis=1)
    out, k = [], 0
    for chain in chains:
        out.append([(duration, columns[k + i]) for i, (duration, _) in enumerate(chain)])
        k += len(chain)
    return out


def _fair_speeds(usage: np.ndarray) -> np.ndarray:
    """Max-min fair ``theta`` of the running stages (rows of ``usage``: the share of each link
    a stage takes at full speed), each at most 1."""
    theta = np.zeros(len(usage))
    rising = np.ones(len(usage), dtype=bool)
    while rising.any():
        # what each link has left; the stages' shares summed row after row (not ``theta @
        # usage``, whose BLAS may fuse or reorder): the compiled schedule adds them so
        left = 1.0 - (theta[:, None] * usage).sum(axis=0)
        demand = usage[rising].sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(demand > EPS, left / demand, np.inf)
        step = min(float(room.min()), float((1.0 - theta[rising]).min()))
        theta[rising] += step
        full = (room <= step + EPS) & (demand > EPS)
        stopped = (theta >= 1.0 - EPS) | (usage[:, full] > EPS).any(axis=1)
        rising &= ~stopped
    return theta


def chains_time(chains: Sequence[Sequence[Stage]]) -> float:
    """Time until every chain's last stage is done, the chains starting together (module
    docstring). Stages of zero duration are skipped. Raises ``ValueError`` for a stage whose
    link time exceeds its duration (it could not run at full speed alone).

    Runs compiled (:mod:`sysmodel.stage_schedule_compiled`): the figures of
    :func:`chains_time_reference` to the last bit, about a hundred times faster."""
    from sysmodel.stage_schedule_compiled import schedule_time
    durations, usage, ends = [], [], []
    for chain in chains:
        for duration, link_s in _running_stages(chain):
            durations.append(duration)
            usage.append(link_s / duration)
        ends.append(len(durations))
    if not durations:
        return 0.0
    return schedule_time(np.array(durations, dtype=float), np.stack(usage), np.array(ends, dtype=np.int64),
                         eps=EPS, done=DONE)


def _running_stages(chain: Sequence[Stage]):
    """``chain``'s stages of positive duration as (duration, link times as floats), each
    checked: no link busier than the stage's duration."""
    for duration, link_s in chain:
        link_s = np.asarray(link_s, dtype=float)
        if duration <= 0:
            continue
        if link_s.size and float(link_s.max()) > duration * (1 + 1e-9):
            raise ValueError(f"stage of {duration} s keeps a link busy {float(link_s.max())} s")
        yield duration, link_s


def chains_time_reference(chains: Sequence[Sequence[Stage]]) -> float:
    """:func:`chains_time` in NumPy, step by step (the specification the compiled schedule is
    tested against)."""
    queues = []
    for chain in chains:
        queue = [(duration, link_s / duration) for duration, link_s in _running_stages(chain)]
        if queue:
            queues.append(queue)
    now = 0.0
    left = [1.0] * len(queues)        # fraction of each chain's current stage still to run
    while queues:
        usage = np.stack([q[0][1] for q in queues])
        theta = _fair_speeds(usage)
        rate = theta / np.array([q[0][0] for q in queues])   # fraction per s
        dt = min(left[i] / rate[i] for i in range(len(queues)))
        now += dt
        keep_q, keep_left = [], []
        for i, queue in enumerate(queues):
            remaining = left[i] - rate[i] * dt
            if remaining <= DONE:
                queue = queue[1:]
                remaining = 1.0
            if queue:
                keep_q.append(queue)
                keep_left.append(remaining)
        queues, left = keep_q, keep_left
    return now
