"""The stripe receiver's contract (:class:`hdl.designs.fabric.stripe_receiver.StripeReceiver`):
its register map and the writes that load one endpoint's stripes. Pure Python.

An endpoint of the striped I/O request (docs/fabric_rtl.md, "Striped I/O: every controller at
once") receives up to ``stripes`` stripes interleaved per packet; per stripe ``k`` it is told
``org`` (the stripe's first data index), ``flits`` (0: the endpoint receives nothing of it) and
the weights ``(wr, hr)`` its data must carry: flit ``t`` of stripe ``k``, lane ``l`` is
``wr * mix(org + t, l) + hr`` (:func:`hdl.contracts.npu_engine.mix`).
"""

from __future__ import annotations

from hdl.contracts.errors import FredError

__all__ = ["STRIPE_REGS", "stripe_reg", "stripe_receiver_writes", "NPU_PAGE_REG", "NPU_PAGE_SIZE", "NPU_ROUTE_BASE",
           "NPU_HEADER_REGS", "NPU_OWN_REGS", "stripe_npu_writes", "stripe_npu_words", "paged_writes",
           "TREE_NPU_REGS", "tree_npu_writes"]

#: Registers per stripe, at address ``len(STRIPE_REGS) * k + index``.
STRIPE_REGS = ("org", "flits", "wr", "hr")
_MASK = 0xFFFFFFFF


def stripe_reg(stripe: int, name: str) -> int:
    """Register address of field ``name`` of stripe ``stripe``."""
    return len(STRIPE_REGS) * stripe + STRIPE_REGS.index(name)


def stripe_receiver_writes(entries, stripes: int) -> list[tuple[int, int]]:
    """(address, value) writes that load ``entries`` (dicts with ``stripe`` and the
    :data:`STRIPE_REGS`) into a receiver of ``stripes`` stripes; every other stripe is loaded
    with 0 flits. FredError for a stripe outside ``0 .. stripes - 1`` or named twice."""
    values = {k: {"org": 0, "flits": 0, "wr": 0, "hr": 0} for k in range(stripes)}
    seen = set()
    for entry in entries:
        k = entry["stripe"]
        if not 0 <= k < stripes or k in seen:
            raise FredError(f"stripe {k} is outside 0..{stripes - 1} or named twice")
        seen.add(k)
        values[k] = {name: entry[name] for name in STRIPE_REGS}
    return [(stripe_reg(k, name), values[k][name] & _MASK) for k in range(stripes) for name in STRIPE_REGS]


#: The striped I/O NPU's program port (:class:`hdl.designs.fabric.stripe_npu.StripeNpu`): the
#: fabric's program port has 6-bit register numbers, fewer than the receiver's 4 per stripe
#: and a route per stripe, so register :data:`NPU_PAGE_REG` selects a page and register
#: ``r`` < 63 of page ``p`` is address ``63 p + r``.
NPU_PAGE_REG = 63
NPU_PAGE_SIZE = 63
#: Address of stripe k's route (its destination endpoint, bit 8: forward it), after the
#: receiver's registers (addresses 0 ..).
NPU_ROUTE_BASE = 256
#: Addresses of the header fields the NPU's forwarded packets carry: their phase index, VC.
NPU_HEADER_REGS = {"phase": 512, "vc": 513}
#: Addresses of an NPU's own part in a reduce-out (``io-reduce``; all 0, the default, in a
#: weight stream): its data weights ``ws`` / ``hs`` (flit index t, lane l: ``ws * mix(t, l) +
#: hs``), ``add`` (1: every forwarded flit gets its own data added), ``start`` (the stripe it
#: starts from its own data, plus 1; 0: none), that stripe's first index and flits.
NPU_OWN_REGS = {"ws": 514, "hs": 515, "add": 516, "start": 517, "start_org": 518, "start_flits": 519}


def stripe_npu_writes(entries, routes: dict, stripes: int, *, phase: int, vc: int,
                      own: dict | None = None) -> list[tuple[int, int]]:
    """(register, value) writes of the fabric's program port that load an NPU of the striped
    I/O request: the receiver's ``entries`` (:func:`stripe_receiver_writes`), ``routes`` =
    ``{stripe: destination endpoint}`` of the stripes it forwards, and its header fields;
    page-register writes go before the writes of each new page."""
    return paged_writes(stripe_npu_words(entries, routes, stripes, phase=phase, vc=vc, own=own))


def stripe_npu_words(entries, routes: dict, stripes: int, *, phase: int, vc: int,
                     own: dict | None = None) -> list[tuple[int, int]]:
    """(address, value) of :func:`stripe_npu_writes` before paging: the StripeNpu's whole
    address space (receiver, routes, header, and its own part :data:`NPU_OWN_REGS`: ``own``,
    missing names 0)."""
    words = stripe_receiver_writes(entries, stripes)
    words += [(NPU_ROUTE_BASE + k, (routes[k] | 1 << 8) if k in routes else 0) for k in range(stripes)]
    own = own or {}
    bad = sorted(set(own) - set(NPU_OWN_REGS))
    if bad:
        raise FredError(f"stripe NPU: no own registers {bad} (it has {list(NPU_OWN_REGS)})")
    return (words + [(NPU_HEADER_REGS["phase"], phase), (NPU_HEADER_REGS["vc"], vc)]
            + [(address, own.get(name, 0) & _MASK) for name, address in NPU_OWN_REGS.items()])


def paged_writes(words, state: dict | None = None) -> list[tuple[int, int]]:
    """(register, value) writes of the paged program port for (address, value) ``words``: a
    page-register write before the first write and before each write on another page.
    ``state`` (address -> value, every register's current value; updated): writes that would
    not change a register are left out (a register not in it is 0), as the program loader's
    ``loader_entries`` does for an unpaged port (an iteration's collectives rewrite only what
    differs)."""
    out, page = [], None
    for address, value in words:
        if state is not None:
            if state.get(address, 0) == value:
                continue
            state[address] = value
        p, reg = divmod(address, NPU_PAGE_SIZE)
        if p != page:
            out.append((NPU_PAGE_REG, p))
            page = p
        out.append((reg, value))
    return out


#: Program registers of an NPU of the striped reduce-out on Fred-B/D's trees
#: (:class:`hdl.designs.fabric.tree_stripe_npu.TreeStripeNpu`; the fabric's program port, 6-bit
#: register numbers, no paging): its data weights (flit index t, lane l: ``ws * mix(t, l) +
#: hs``), the stripes (one per controller) and each stripe's flits, the header's phase (the
#: shared phase) and VC; ``home`` / ``home_hi``: the bit mask of its L1's own stripes (0-31,
#: 32-63), sent ``delay`` places late in the one packet order
#: (:func:`hdl.compiler.io_stripe_trees.home_late_order`).
TREE_NPU_REGS = {"ws": 0, "hs": 1, "stripes": 2, "stripe_flits": 3, "phase": 4, "vc": 5,
                 "home": 6, "home_hi": 7, "delay": 8}


def tree_npu_writes(*, ws: int, hs: int, stripes: int, stripe_flits: int, phase: int, vc: int,
                    home=(), delay: int = 0) -> list[tuple[int, int]]:
    """(register, value) writes that load a :class:`~hdl.designs.fabric.tree_stripe_npu.TreeStripeNpu`:
    every register of :data:`TREE_NPU_REGS`; ``home``: the stripes sent ``delay`` places late
    (default none: the one order). FredError for no stripes, empty stripes, a home stripe
    outside the stripes or a negative delay."""
    for name, value in (("stripes", stripes), ("stripe_flits", stripe_flits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FredError(f"tree stripe NPU: {name} must be a positive integer, got {value!r}")
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise FredError(f"tree stripe NPU: delay must be an integer >= 0, got {delay!r}")
    bad = [k for k in home if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < min(stripes, 64)]
    if bad:
        raise FredError(f"tree stripe NPU: home stripes {bad} outside 0..{min(stripes, 64) - 1}")
    mask = sum(1 << k for k in set(home))
    values = {"ws": ws, "hs": hs, "stripes": stripes, "stripe_flits": stripe_flits, "phase": phase, "vc": vc,
              "home": mask, "home_hi": mask >> 32, "delay": delay}
    return [(reg, values[name] & _MASK) for name, reg in TREE_NPU_REGS.items()]
