"""Router: flows -> per-phase configurations of Fred_m(P).

Algorithm (the paper's, made complete by search). At one level of Fred_m(P), P >= 4:

1. Flows sharing an input microswitch (ports 2u, 2u+1) or an output microswitch conflict.
   Every flow must use exactly ONE middle subnetwork at this level: an input port is sent
   on one wire only and sums are formed only inside a subnetwork, so all inputs of a flow
   must meet in the same subnetwork. The colour of a flow is its subnetwork; conflicting
   flows need different colours.
2. A flow owning both ports of an input microswitch reduces there (one wire); owning both
   ports of an output microswitch, it broadcasts there.
3. Each subnetwork k is routed recursively with the flows of colour k projected onto its
   sub-ports (port p -> p // 2). Fred_m(2) is one RD microswitch and always routes. For odd
   P (compiler extension) the last port has its own demux/mux, shares no microswitch and so
   adds no conflict; it projects to the last sub-port of a Fred_m(ceil(P/2)).

Because of (1), a phase is routable **iff** some colouring at every level makes all
subnetworks routable; the search below decides that exactly unless it hits its bound.

Search: depth-first colouring with conflict-directed backjumping (CBJ). Variables (flows)
are ordered breadth-first over the conflict graph, highest degree first; colours are tried
least-loaded first (spreading flows makes subnetworks easier) and, to break the symmetry of
interchangeable subnetworks, a flow may only open the next unused colour. At a complete
colouring each colour class is routed recursively (memoised per (size, projected flow set)).
When a subnetwork fails, its flow set is shrunk by deletion to a minimal failing subset (a
*nogood*: those flows may never share a colour; failure is monotone, since removing flows
from a routable set keeps it routable) and the search backjumps to the latest flow of the
nogood and tries another colouring there, so a failed subnetwork makes the level above try
other colourings before giving up.

Bound: every colouring step at any level counts one node against ``budget`` (default
``DEFAULT_BUDGET`` = 200,000 per one-phase attempt; the phase-splitting checks use
``split_budget``, default 20,000). A search that reaches the bound stops and reports
``"search-bound"`` (not proven impossible); otherwise failure is ``"impossible"`` (proven:
the search was exhaustive up to symmetry).

Phase splitting (when one phase is impossible): first-fit decreasing -- flows sorted by
size (ports, largest first) each join the first phase that still routes with them, else
open a new phase -- then improvement: repeatedly try to empty the phase with the fewest
flows by moving each of its flows into another phase, and a few (``restarts``) first-fit
passes in seeded random orders, keeping the fewest phases. The lower bound is 2 (one phase
was proven impossible); a 2-phase result is therefore optimal and reported as such. When
the heuristic needs h > 2 phases, an exact search for h - 1 phases follows (depth-first
assignment of flows, largest first, to phases, pruning as soon as a phase stops routing --
routability is monotone -- bounded by ``exact_checks`` fit checks, default 2,000): it
either finds h - 1 phases (and tries h - 2, ...) or, when exhaustive with every failed
check proven, raises the lower bound to h, making the result provably optimal.
"""

from __future__ import annotations

import random
from functools import lru_cache
from dataclasses import dataclass

from hdl.contracts.errors import FredError
from hdl.contracts.encoding import (DemuxMode, InputMode, MuxMode, OutputMode, RDMode, SwitchConfig,
                                   check_any_size)
from hdl.compiler.flows import Flow, validate_flows

__all__ = ["Phase", "RouteResult", "Router", "route", "phase_count", "route_one_phase",
           "DEFAULT_BUDGET", "DEFAULT_SPLIT_BUDGET"]

#: The modes the search assembles, one validated object per distinct value: modes are frozen
#: values, and a sub-problem's assembly makes the same few (at most a few hundred per m) again
#: and again, each construction re-running the mode's checks (hdl.contracts.encoding).
_MODES = {kind: lru_cache(maxsize=None)(kind) for kind in (InputMode, OutputMode, DemuxMode, MuxMode, RDMode)}

DEFAULT_BUDGET = 200_000
DEFAULT_SPLIT_BUDGET = 20_000
DEFAULT_RESTARTS = 4
DEFAULT_EXACT_CHECKS = 2_000

_SUCCESS = object()


class _Exhausted(Exception):
    """The search bound was reached."""


@dataclass(frozen=True)
class Phase:
    """One phase: the flows served together and the configuration that realises them."""

    flows: tuple[Flow, ...]
    config: SwitchConfig

    def to_dict(self) -> dict:
        return {"flows": [str(f) for f in self.flows], "config": self.config.to_dict()}


@dataclass
class RouteResult:
    """Outcome of :func:`route`.

    Members:
        ports, middle: the switch.
        flows: the flows asked for (in the given order).
        phases: list of :class:`Phase`; length 1 when routable in one phase.
        one_phase: ``"routed"``, ``"impossible"`` (proven by exhaustive search) or
            ``"search-bound"`` (no one-phase routing found within the bound).
        lower_bound: proven lower bound on the number of phases (1 when one phase was not
            proven impossible, 2 when it was, more when the exact split search proved it).
        optimal: ``len(phases) == lower_bound``.
        nodes: search nodes spent (all attempts).
        method: how the phases were obtained (human-readable).
    """

    ports: int
    middle: int
    flows: tuple[Flow, ...]
    phases: list[Phase]
    one_phase: str
    lower_bound: int
    nodes: int
    method: str

    @property
    def routable_in_one_phase(self) -> bool:
        return self.one_phase == "routed"

    @property
    def optimal(self) -> bool:
        return len(self.phases) == self.lower_bound

    def to_dict(self) -> dict:
        return {"ports": self.ports, "middle": self.middle,
                "flows": [str(f) for f in self.flows],
                "one_phase": self.one_phase, "phase_count": len(self.phases),
                "lower_bound": self.lower_bound, "optimal": self.optimal,
                "nodes": self.nodes, "method": self.method,
                "phases": [p.to_dict() for p in self.phases]}


@lru_cache(maxsize=None)
def _idle_modes(ports: int, middle: int) -> tuple:
    """Every microswitch of Fred_middle(ports) idle (immutable modes), made once per size: a
    router is made per :func:`route` call, and validating the idle configuration cost more
    than routing a small flow set (the system model routes thousands)."""
    return SwitchConfig.idle(ports, middle).modes


class Router:
    """Routes flow sets on one Fred_m(P); keeps a memo of sub-network results across calls.

    Parameters (keyword-only): ``ports``, ``middle``, ``budget`` (nodes per one-phase
    attempt), ``split_budget`` (nodes per fit check while splitting), ``restarts``
    (random first-fit restarts), ``seed``, ``backtrack`` (default True; False keeps only
    the first valid colouring at each level, i.e. the paper's greedy algorithm without
    backtracking, for comparison: a failure then is reported as "search-bound").
    """

    def __init__(self, *, ports: int, middle: int, budget: int = DEFAULT_BUDGET,
                 split_budget: int = DEFAULT_SPLIT_BUDGET, restarts: int = DEFAULT_RESTARTS,
                 seed: int = 0, backtrack: bool = True, exact_checks: int = DEFAULT_EXACT_CHECKS):
        check_any_size(ports, middle)
        for name, value in (("budget", budget), ("split_budget", split_budget)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise FredError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
            raise FredError(f"restarts must be an integer >= 0, got {restarts!r}")
        self.ports, self.middle = ports, middle
        self.backtrack = bool(backtrack)
        if isinstance(exact_checks, bool) or not isinstance(exact_checks, int) or exact_checks < 0:
            raise FredError(f"exact_checks must be an integer >= 0, got {exact_checks!r}")
        self.exact_checks = exact_checks
        self.budget, self.split_budget, self.restarts, self.seed = budget, split_budget, restarts, seed
        self._memo: dict = {}
        self._idle = {}
        size = ports
        while size >= 2 and size not in self._idle:
            self._idle[size] = _idle_modes(size, middle)
            size = (size + 1) // 2  # subnetworks of Fred_m(P) are Fred_m(ceil(P/2))
        self._nodes = 0
        self._limit = 0
        self.total_nodes = 0

    # -- public -----------------------------------------------------------------------------
    def try_one_phase(self, flows, budget: int | None = None) -> tuple[SwitchConfig | None, str]:
        """Route ``flows`` in one phase: ``(config, "routed")``, ``(None, "impossible")`` or
        ``(None, "search-bound")``. ``flows`` must already be valid for one phase."""
        modes, status = self._try_modes(flows, budget)
        if modes is None:
            return None, status
        return SwitchConfig(self.ports, self.middle, modes), status

    def _try_modes(self, flows, budget: int | None = None) -> tuple[tuple | None, str]:
        """Like :meth:`try_one_phase` but returns the raw mode tuple (no SwitchConfig
        validation: the fit checks of phase splitting only need the verdict)."""
        key = tuple(sorted((f.inputs, f.outputs) for f in flows))
        if len(self._memo) > 500_000:  # keep memory bounded in long sweeps
            self._memo.clear()
        self._nodes = 0
        self._limit = self.budget if budget is None else budget
        try:
            modes = self._route(self.ports, key)
        except _Exhausted:
            return None, "search-bound"
        finally:
            self.total_nodes += self._nodes
        if modes is None:
            return None, "impossible"
        return modes, "routed"

    def route(self, flows, *, split: bool = True) -> RouteResult:
        flows = tuple(validate_flows(flows, self.ports))
        start = self.total_nodes
        routed, status, lower, method = self._plan(flows, split)
        position = {f: i for i, f in enumerate(flows)}
        phases = [Phase(tuple(sorted(group, key=position.__getitem__)),
                        SwitchConfig(self.ports, self.middle, modes)) for group, modes in routed]
        phases.sort(key=lambda p: min(flows.index(f) for f in p.flows))
        return RouteResult(self.ports, self.middle, flows, phases, status, lower,
                           self.total_nodes - start, method)

    def phase_count(self, flows) -> int:
        """``len(self.route(flows).phases)``: the same search, the same checks, but without
        making (and validating) each phase's :class:`SwitchConfig` -- what a caller that only
        needs the number of phases (the system model, ``sysmodel.switch_routing``) would
        otherwise pay for on every new set of flows."""
        return len(self._plan(tuple(validate_flows(flows, self.ports)), True)[0])

    def _plan(self, flows: tuple, split: bool) -> tuple[list[tuple], str, int, str]:
        """The search :meth:`route` and :meth:`phase_count` share, on validated ``flows``: (the
        phases as (flows, modes) groups, the one-phase status, the lower bound on the phases,
        the method). One phase if the flows fit; else, with ``split``, the phase splitting,
        without it a :class:`FredError`."""
        modes, status = self._try_modes(flows)
        if modes is not None:
            return [(flows, modes)], status, 1, "one phase"
        if not split:
            raise FredError(f"flows {'; '.join(map(str, flows))} cannot be routed in one phase on "
                            f"Fred_{self.middle}({self.ports}) ({status}); allow splitting into phases")
        routed, method, lower = self._split_groups(flows, 2 if status == "impossible" else 1)
        return routed, status, lower, method

    # -- phase splitting --------------------------------------------------------------------
    def _fits(self, flows) -> bool:
        return self._try_modes(flows, self.split_budget)[0] is not None

    def _first_fit(self, order) -> list[list[Flow]]:
        groups: list[list[Flow]] = []
        for flow in order:
            for group in groups:
                if self._fits(group + [flow]):
                    group.append(flow)
                    break
            else:
                groups.append([flow])
        return groups

    def _improve(self, groups: list[list[Flow]]) -> list[list[Flow]]:
        improved = True
        while improved and len(groups) > 2:
            improved = False
            for victim in sorted(range(len(groups)), key=lambda i: len(groups[i])):
                trial = [list(g) for g in groups]
                moving = trial.pop(victim)
                for flow in sorted(moving, key=lambda f: -(len(f.inputs) + len(f.outputs))):
                    for group in trial:
                        if self._fits(group + [flow]):
                            group.append(flow)
                            break
                    else:
                        break
                else:
                    groups, improved = trial, True
                    break
        return groups

    def _exact(self, flows, k: int) -> tuple[list[list[Flow]] | None, bool]:
        """Split ``flows`` into ``k`` routable phases by bounded exhaustive search.

        Returns ``(groups, True)`` if found, ``(None, True)`` if proven impossible and
        ``(None, False)`` if the check bound was hit or a fit check was not a proof.
        """
        order = sorted(flows, key=lambda f: -(len(f.inputs) + len(f.outputs)))
        groups: list[list[Flow]] = [[] for _ in range(k)]
        state = {"checks": 0, "proven": True}

        def dfs(i: int, used: int) -> bool:
            if i == len(order):
                return True
            for g in range(min(k, used + 1)):  # phases are interchangeable: open one at a time
                state["checks"] += 1
                if state["checks"] > self.exact_checks:
                    raise _Exhausted
                modes, status = self._try_modes(groups[g] + [order[i]], self.split_budget)
                if modes is None:
                    state["proven"] &= status == "impossible"
                    continue
                groups[g].append(order[i])
                if dfs(i + 1, max(used, g + 1)):
                    return True
                groups[g].pop()
            return False

        try:
            if dfs(0, 0):
                return groups, True
        except _Exhausted:
            return None, False
        return None, state["proven"]

    def _split_groups(self, flows, lower: int) -> tuple[list[tuple], str, int]:
        """(the phases as (flows, modes) groups, the method, the lower bound) of splitting
        ``flows``; :meth:`route` makes them :class:`Phase` objects."""
        order = sorted(flows, key=lambda f: -(len(f.inputs) + len(f.outputs)))
        best = self._improve(self._first_fit(order))
        rng = random.Random(self.seed)
        tries = 0
        while len(best) > 2 and tries < self.restarts:
            tries += 1
            shuffled = list(flows)
            rng.shuffle(shuffled)
            candidate = self._improve(self._first_fit(shuffled))
            if len(candidate) < len(best):
                best = candidate
        exact = ""
        while len(best) > max(lower, 2) and self.exact_checks:
            groups, proven = self._exact(flows, len(best) - 1)
            if groups is not None:
                best, exact = groups, " + exact search"
            else:
                if proven and lower >= 2:
                    lower, exact = len(best), " + exact search (proved optimal)"
                break
        routed = []
        for group in best:
            # Re-route each group with the full budget (the fit check found a routing already).
            modes, _ = self._try_modes(group, self.split_budget)
            if modes is None:  # pragma: no cover - a fit check already routed this group
                raise FredError(f"internal error: phase {group} no longer routes")
            routed.append((group, modes))
        method = (f"split: first-fit decreasing + phase elimination"
                  f"{f' + {tries} random restarts' if tries else ''}{exact}")
        return routed, method, lower

    # -- one-phase search ---------------------------------------------------------------------
    def _route(self, ports: int, flows: tuple) -> tuple | None:
        """Modes of Fred_m(ports) realising ``flows`` (sorted tuple of (inputs, outputs) local
        port tuples), or None if impossible. Raises _Exhausted at the bound."""
        if not flows:
            return self._idle[ports]
        key = (ports, flows)
        memo = self._memo
        if key in memo:
            return memo[key]
        result = self._base(flows) if ports == 2 else self._level(ports, flows)
        memo[key] = result
        return result

    @staticmethod
    def _base(flows) -> tuple:
        out = [0, 0]
        for inputs, outputs in flows:
            value = 3 if len(inputs) == 2 else (1 if inputs[0] == 0 else 2)
            for port in outputs:
                out[port] = value
        return (_MODES[RDMode](out[0], out[1]),)

    def _level(self, ports: int, flows: tuple) -> tuple | None:
        m = self.middle
        r = ports // 2             # 2x2 input/output microswitch pairs
        sub_ports = (ports + 1) // 2  # odd P: the last port p = 2r maps to sub-port r = p // 2
        n = len(flows)
        proj = [(tuple(sorted({p >> 1 for p in ins})), tuple(sorted({p >> 1 for p in outs})))
                for ins, outs in flows]
        in_owner = [None] * ports
        out_owner = [None] * ports
        for i, (ins, outs) in enumerate(flows):
            for p in ins:
                in_owner[p] = i
            for p in outs:
                out_owner[p] = i
        adj = [set() for _ in range(n)]
        for owner in (in_owner, out_owner):
            for u in range(r):
                a, b = owner[2 * u], owner[2 * u + 1]
                if a is not None and b is not None and a != b:
                    adj[a].add(b)
                    adj[b].add(a)

        if n <= m:
            # Distinct colours: every subnetwork gets at most one flow, which always routes.
            colour = list(range(n))
            subs = [self._route(sub_ports, (proj[i],)) for i in range(n)]
            return self._assemble(ports, flows, in_owner, out_owner, colour,
                                  subs + [self._idle[sub_ports]] * (m - n))

        # Static variable order: BFS over the conflict graph, highest degree first.
        order: list[int] = []
        seen = [False] * n
        for start in sorted(range(n), key=lambda i: (-len(adj[i]), i)):
            if seen[start]:
                continue
            seen[start] = True
            queue = [start]
            while queue:
                node = queue.pop(0)
                order.append(node)
                for nb in sorted(adj[node], key=lambda j: (-len(adj[j]), j)):
                    if not seen[nb]:
                        seen[nb] = True
                        queue.append(nb)
        pos = [0] * n
        for d, i in enumerate(order):
            pos[i] = d
        adj_pos = [[] for _ in range(n)]   # indexed by position, like colour[]
        for i in range(n):
            adj_pos[pos[i]] = sorted(pos[j] for j in adj[i])

        colour = [-1] * n          # indexed by position
        load = [0] * m
        nogoods_at: list[list[tuple[int, ...]]] = [[] for _ in range(n)]  # by last position
        found: list = []

        def check(d: int, c: int):
            for e in adj_pos[d]:
                if e < d and colour[e] == c:
                    return (e,)
            for nogood in nogoods_at[d]:
                if all(colour[e] == c for e in nogood if e != d):
                    return nogood
            return None

        def leaf():
            classes = [[] for _ in range(m)]
            for d in range(n):
                classes[colour[d]].append(d)
            subs = []
            for k in range(m):
                members = classes[k]
                sub = self._route(sub_ports, tuple(sorted(proj[order[d]] for d in members)))
                if sub is None:
                    if not self.backtrack:
                        raise _Exhausted  # greedy: the first colouring failed, give up
                    nogood = self._minimise(sub_ports, members, order, proj)
                    last = max(nogood)
                    nogoods_at[last].append(tuple(nogood))
                    return set(nogood)
                subs.append(sub)
            found.append(subs)
            return _SUCCESS

        def dfs(d: int):
            self._nodes += 1
            if self._nodes > self._limit:
                raise _Exhausted
            if d == n:
                return leaf()
            used = max(colour[:d], default=-1) + 1
            conflicts: set[int] = set()
            if used < m - 1:
                # Symmetry breaking hides colours > used: their failure depends on every
                # earlier flow, so fall back to chronological backtracking from here.
                conflicts.update(range(d))
            values = sorted(range(min(m, used + 1)), key=lambda c: (load[c], c))
            for c in values:
                reason = check(d, c)
                if reason is not None:
                    conflicts.update(e for e in reason if e != d)
                    continue
                colour[d] = c
                load[c] += 1
                result = dfs(d + 1)
                if result is _SUCCESS:
                    return _SUCCESS
                colour[d] = -1
                load[c] -= 1
                if d not in result:
                    return result  # backjump past this flow
                conflicts.update(e for e in result if e != d)
            return conflicts

        if dfs(0) is not _SUCCESS:
            return None
        by_flow = [0] * n
        for d in range(n):
            by_flow[order[d]] = colour[d]
        return self._assemble(ports, flows, in_owner, out_owner, by_flow, found[0])

    def _minimise(self, r: int, members: list[int], order, proj) -> list[int]:
        """Deletion-minimal subset of ``members`` (positions) whose projected flows fail."""
        current = list(members)
        for d in sorted(members, reverse=True):  # drop late flows first: earlier backjumps
            trial = [e for e in current if e != d]
            if len(trial) <= 1:  # one flow alone always routes
                continue
            if self._route(r, tuple(sorted(proj[order[e]] for e in trial))) is None:
                current = trial
        return current

    def _assemble(self, ports, flows, in_owner, out_owner, colour, subs) -> tuple:
        r = ports // 2
        modes = []
        for u in range(r):
            a, b = in_owner[2 * u], in_owner[2 * u + 1]
            if a is not None and a == b:
                modes.append(_MODES[InputMode](1, colour[a], 1, colour[a], 1))
            else:
                modes.append(_MODES[InputMode](a is not None, colour[a] if a is not None else 0,
                                               b is not None, colour[b] if b is not None else 0, 0))
        if ports % 2:
            last = in_owner[ports - 1]
            modes.append(_MODES[DemuxMode](last is not None, colour[last] if last is not None else 0))
        for sub in subs:
            modes.extend(sub)
        for v in range(r):
            a, b = out_owner[2 * v], out_owner[2 * v + 1]
            modes.append(_MODES[OutputMode](a is not None, colour[a] if a is not None else 0,
                                            b is not None, colour[b] if b is not None else 0))
        if ports % 2:
            last = out_owner[ports - 1]
            modes.append(_MODES[MuxMode](last is not None, colour[last] if last is not None else 0))
        return tuple(modes)


def route(*, ports: int, middle: int, flows, split: bool = True, budget: int = DEFAULT_BUDGET,
          split_budget: int = DEFAULT_SPLIT_BUDGET, restarts: int = DEFAULT_RESTARTS,
          seed: int = 0, exact_checks: int = DEFAULT_EXACT_CHECKS) -> RouteResult:
    """Route ``flows`` on Fred_m(P) (``ports`` = P, ``middle`` = m) into phases.

    Returns a :class:`RouteResult` whose ``phases`` has length 1 when one phase suffices;
    otherwise (with ``split=True``) the flows are split into as few phases as the method in
    the module docstring finds. Raises :class:`FredError` for invalid input (overlapping
    flows, ports out of range, no flows, unsupported P or m) or, with ``split=False``, when
    one phase is not enough.
    """
    router = Router(ports=ports, middle=middle, budget=budget, split_budget=split_budget,
                    restarts=restarts, seed=seed, exact_checks=exact_checks)
    return router.route(flows, split=split)


def phase_count(*, ports: int, middle: int, flows) -> int:
    """``len(route(ports=ports, middle=middle, flows=flows).phases)`` with the default search
    bounds (:meth:`Router.phase_count`: no :class:`SwitchConfig` is made)."""
    return Router(ports=ports, middle=middle).phase_count(flows)


def route_one_phase(*, ports: int, middle: int, flows, budget: int = DEFAULT_BUDGET):
    """``(config or None, status)`` for one phase; see :meth:`Router.try_one_phase`."""
    router = Router(ports=ports, middle=middle, budget=budget)
    return router.try_one_phase(validate_flows(flows, ports))
