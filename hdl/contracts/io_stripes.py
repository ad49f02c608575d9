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

__all__ = ["STRIPE_REGS", "stripe_reg", "stripe_receiver_writes"]

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
