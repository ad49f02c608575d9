"""The switches a transfer holds, as its pseudo-links' loads (:func:`sysmodel.switch_phases.transfer_links`),
compiled by numba (docs/sysmodel.md, Speed, thirty-third increment; issue 31).

Why: a memoising communication timer asks for these loads once per distinct collective set on
every network it times it on -- 50,456 times in GPT-3's design-space grid -- and the NumPy
steps (:func:`sysmodel.switch_phases.held_times_reference`: the switches the transfer
crosses, its busiest links and whether they pace it, its busy time per switch) were a dozen
calls on arrays of a hundred links, about 25 us a set. Here they are one loop. It makes no
sums: the same comparisons and maxima over the same values, so its figures are the
reference's to the last bit (``tests/sysmodel/test_switch_links_compiled.py`` compares them on
random loads over every FRED fabric). Like the engine's loop (:mod:`sysmodel.engine_compiled`)
the machine code is cached in ``__pycache__``; a fresh clone compiles it once, which
:func:`warm_up` states apart.

Arguments of :func:`held_times`: ``loads`` (bytes per link of the network), ``time`` (per link,
its bytes' time: ``loads / bandwidths``), ``flat`` and ``ptr`` (every switch's links, in switch
order: switch ``s``'s are ``flat[ptr[s]:ptr[s + 1]]``), ``into`` / ``out_of`` (per link: it
leaves an endpoint into a switch / a switch into an endpoint), ``stored`` (per switch: the
transfer stores a phase there) and ``online`` (it stores none: routed online).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Imported first for its side effect: numba's NumPy support loaded without the BLAS probe that
# would import scipy.linalg (sysmodel.engine_compiled explains it).
import sysmodel.engine_compiled  # noqa: F401,E402  (isort: keep after numba)

__all__ = ["held_times", "BUSIEST", "warm_up"]

#: A link whose time is at least this share of the longest is one of the transfer's busiest
#: (:func:`sysmodel.switch_phases._paced_links`; the engine's times are running sums).
BUSIEST = 1 - 1e-12


def held_times(loads: np.ndarray, time: np.ndarray, flat: np.ndarray, ptr: np.ndarray, into: np.ndarray,
               out_of: np.ndarray, stored: np.ndarray, online: bool) -> np.ndarray:
    """Per switch, the seconds the transfer holds its stored-phase pseudo-link, then per switch
    its default-phase one (:func:`sysmodel.switch_phases.transfer_links`; the module docstring
    gives the arguments): its busy time at every switch it crosses that holds it, 0 elsewhere."""
    return _held(loads, time, flat, ptr, into, out_of, stored, online, BUSIEST)


@njit(cache=True)
def _held(loads, time, flat, ptr, into, out_of, stored, online, busiest):
    n = time.shape[0]
    switches = ptr.shape[0] - 1
    longest = time[0]
    for i in range(1, n):
        if time[i] > longest:
            longest = time[i]
    # its busiest links pace it when all leave endpoints into switches, or all leave switches
    # into endpoints, and it loads some other link (sysmodel.switch_phases._paced_links)
    threshold = longest * busiest
    count, loaded, all_into, all_out = 0, 0, True, True
    for i in range(n):
        if time[i] >= threshold:
            count += 1
            all_into = all_into and into[i]
            all_out = all_out and out_of[i]
        if time[i] > 0:
            loaded += 1
    paced = count > 0 and (all_into or all_out) and loaded > count
    held = np.zeros(2 * switches)
    for s in range(switches):
        crossed = False
        busy = 0.0 if paced else longest
        for p in range(ptr[s], ptr[s + 1]):
            link = flat[p]
            if loads[link] > 0:
                crossed = True
            # paced: its busiest time on the switch's other links (the pacing ones count 0)
            if paced and time[link] < threshold and time[link] > busy:
                busy = time[link]
        if crossed:
            if stored[s]:
                held[s] = busy
            if online:
                held[switches + s] = busy
    return held


def warm_up() -> tuple[float, bool]:
    """Load (or, without a cached copy, compile) :func:`held_times` on a two-link, one-switch
    transfer: (wall seconds it took, whether it compiled)."""
    import time
    misses = sum(_held.stats.cache_misses.values())
    begin = time.perf_counter()
    held_times(np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.array([0, 1]), np.array([0, 2]),
               np.array([True, False]), np.array([False, True]), np.array([True]), False)
    return time.perf_counter() - begin, sum(_held.stats.cache_misses.values()) > misses
