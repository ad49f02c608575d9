"""collectives._io_chain_time's event loop against the loop it replaced (kept here as the
reference): the same figure, bit for bit, on random chains, heads, rates and sizes, with ties
between events forced (heads and spans on a coarse grid), and the memo of its result
(``ModelCache.io_chain_times``) keyed on everything it reads."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel import collectives as C

_RATE_EPS = C._RATE_EPS


def _reference_io_chain_time(net, heads, wire: float, flit_s: float) -> float:
    """The loop of main c53aaa5 (session 13), verbatim but for its name: at each event it
    rebuilds the chains with bytes in a backlog by scanning every chain of the link."""
    per_link: dict[int, list[tuple[float, float, float]]] = {}
    best = 0.0
    for route_heads, total in heads:
        span = wire / min(float(net.link_bw[link]) for link, _ in route_heads)
        best = max(best, span + total)
        for link, head in route_heads:
            per_link.setdefault(link, []).append((head, span, total - head))
    for link, chains in per_link.items():
        if len(chains) < 2:
            continue
        work = wire / float(net.link_bw[link])
        events = sorted([(h, 1, i) for i, (h, _, _) in enumerate(chains)]
                        + [(h + f, -1, i) for i, (h, f, _) in enumerate(chains)])
        inflow, backlog, now = 0.0, 0.0, events[0][0]
        members: set[int] = set()
        for when, step, i in events:
            dt = when - now
            if inflow > 1.0 + _RATE_EPS:
                backlog += (inflow - 1.0) * dt
            elif backlog > 0.0 and inflow < 1.0 - _RATE_EPS:
                if backlog <= (1.0 - inflow) * dt:
                    best = max(best, now + backlog / (1.0 - inflow) + flit_s
                               + max(chains[j][2] for j in members))
                    backlog, members = 0.0, set()
                else:
                    backlog -= (1.0 - inflow) * dt
            now = when
            inflow += step * work / chains[i][1]
            if inflow > 1.0 + _RATE_EPS or backlog > 0.0:
                members |= {j for j, (h, f, _) in enumerate(chains) if h <= now < h + f}
        if backlog > 0.0:
            best = max(best, now + backlog + flit_s + max(chains[j][2] for j in members))
    return best


def _random_case(rng: random.Random):
    """A network of a few links (controller links slower or faster than the shared ones) and
    1-12 chains crossing 1-6 of them, some twice; heads and latencies on a grid of 0.5 (many
    events at one time), rates from a small set (equal spans), or continuous; in some cases
    ("far") every head is offset by 2**52 s and some links are fast, so that a chain crossing
    only fast links has a span lost to rounding (h + F == h: a stream that never streams) while
    the others stream and backlog."""
    n_links = rng.randint(2, 10)
    grid = rng.random() < 0.6
    far = rng.random() < 0.2
    rate_set = [0.5, 1.0, 1000.0, 1000.0] if far else [0.25, 0.5, 1.0, 2.0, 3.0]
    bw = np.array([rng.choice(rate_set) if grid or far else rng.uniform(0.1, 4.0) for _ in range(n_links)])
    heads = []
    for _ in range(rng.randint(1, 12)):
        links = [rng.randrange(n_links) for _ in range(rng.randint(1, 3 if far else 6))]
        t, route = (2.0 ** 52 if far else 0.0), []
        for link in links:
            route.append((link, t))
            t += rng.choice([0.0, 0.5, 1.0, 1.5]) if grid else rng.uniform(0.0, 2.0)
        heads.append((tuple(route), t + (rng.choice([0.0, 0.5]) if grid else rng.uniform(0.0, 1.0))))
    wire = rng.choice([1.0, 2.0, 5.0, 10.0]) if grid else rng.uniform(0.5, 20.0)
    flit_s = rng.choice([0.0, 0.5, 2.0]) if grid else rng.uniform(0.0, 2.0)
    return SimpleNamespace(link_bw=bw), tuple(heads), wire, flit_s


def _outcome(f, *args):
    try:
        return ("value", f(*args))
    except ValueError:
        return ("error", None)


@pytest.mark.parametrize("seed", range(8))
def test_the_event_loop_equals_the_reference_bit_for_bit_on_random_chains(seed):
    rng = random.Random(seed)
    backlogged = 0
    for _ in range(400):
        net, heads, wire, flit_s = _random_case(rng)
        want = _outcome(_reference_io_chain_time, net, heads, wire, flit_s)
        got = _outcome(C._io_chain_time, net, heads, wire, flit_s)
        kept = _outcome(C._io_chain_time, net, heads, wire, flit_s, C._io_chain_layout(heads))
        assert got == want and kept == want, (heads, wire, flit_s, net.link_bw)
        if want[0] == "value":
            alone = max(wire / min(float(net.link_bw[l]) for l, _ in r) + total for r, total in heads)
            backlogged += want[1] > alone      # a backlog's figure decided the time
    assert backlogged > 20                     # the cases exercise the backlog branch, not only the chains alone


def test_the_reference_and_the_loop_agree_on_the_hand_case():
    """The two-chain case of tests/sysmodel/test_controller_lead.py (50 and 72 s by hand)."""
    for shared, expected in ((1.0, 50.0), (0.5, 72.0)):
        net = SimpleNamespace(link_bw=np.array([0.5, 0.5, shared]))
        heads = ((((0, 0.0), (2, 0.0)), 30.0), (((1, 0.0), (2, 1.0)), 25.0))
        assert C._io_chain_time(net, heads, 10.0, 2.0) == expected
        assert _reference_io_chain_time(net, heads, 10.0, 2.0) == expected


def test_the_chain_times_memo_is_hit_only_with_equal_rates_sizes_and_groups():
    """An I/O chain collective on Fred-A evaluated twice keeps one chain time and one pair of
    byte rows (the traffic gets copies: changing one traffic's loads does not change the next);
    at another size or on a network whose controller links' rate differs the time is computed
    again, and the traffic equals one built with empty caches."""
    from dataclasses import replace

    from sysmodel.collectives import Collective, build_network, collective_traffic
    from sysmodel.model_cache import ModelCache, using
    from sysmodel.platform import default_platform
    P = default_platform()
    other = replace(P, io_gbps=P.io_gbps * 1.5)    # the controllers' links: the chains' rate
    c = Collective("io-load", tuple(range(0, 20, 2)), 3e6 + 5)
    with using(ModelCache()) as cache:
        first = collective_traffic(build_network(P, "fred-a"), c)[1]
        kept = first.loads.copy()
        first.loads += 1.0                      # a traffic's arrays are its own, not the memo's
        second = collective_traffic(build_network(P, "fred-a"), c)[1]
        assert len(cache.io_chain_times) == 1 and len(cache.io_chain_rows) == 1
        assert np.array_equal(second.loads, kept) and second.loads is not first.loads
        collective_traffic(build_network(P, "fred-a"), replace(c, size=7.1e5))
        assert len(cache.io_chain_times) == 2
        collective_traffic(build_network(other, "fred-a"), c)
        assert len(cache.io_chain_times) == 3
    with using(ModelCache()):
        fresh = collective_traffic(build_network(P, "fred-a"), c)[1]
    assert second.latency_s == fresh.latency_s and np.array_equal(second.loads, fresh.loads)
    assert np.array_equal(second.sent, fresh.sent)


def test_a_stream_whose_span_is_lost_to_rounding_is_never_in_a_backlog():
    """20 streams of 0.4 s each at h = 2**52 - 4 (where the spacing of doubles is 0.5, so they
    stream) ask all of a rate-1 link: a backlog of 7.6 s that lasts past 2**52. One more chain
    reaches the link at 2**52 with the same 0.4 s, lost there (spacing 1: h + F == h), and a
    long way on (1000 s). It never streams (h <= t < h + F holds at no t), so it is not a
    member of the backlog and its way on is not the backlog's: the figure is the chain's own,
    2**52 + 1000 (its span lost too), not the backlog's end (past 2**52) + 1000."""
    H = 2.0 ** 52
    net = SimpleNamespace(link_bw=np.array([1.0]))
    heads = tuple((((0, H - 4.0),), H - 3.0) for _ in range(20)) + ((((0, H),), H + 1000.0),)
    want = _reference_io_chain_time(net, heads, 0.4, 0.0)
    assert C._io_chain_time(net, heads, 0.4, 0.0) == want
    assert want == H + 1000.0
