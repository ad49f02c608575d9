"""The garbage-collector policy a long ``fred`` command opts into: survivors frozen step by step.

The system model keeps ~10^5 long-lived objects (imports, networks, collective results, graph
templates) and every cyclic collection that reaches them walks them all again; with
``gc.freeze()`` the collector ignores them. This is a policy of the *command process* (``fred
eval`` and ``fred validate``, which exit when the command ends), never of the library:
:mod:`sysmodel` and :mod:`studies` set nothing global, and a caller without this context (a
test, a notebook) keeps Python's collector as it was.

Freezing is exact for what is computed (the collector never changes a result, only when memory
is reclaimed); its one risk is cyclic garbage frozen before it is found, which would then never
be freed. So every freeze here runs a full ``gc.collect()`` first: at a step boundary (an
iteration or a case finished, its locals gone) whatever is unreachable is freed, and only what
is still reachable -- the caches, the results -- is frozen. The collection is cheap, as it walks
only what was allocated since the previous freeze.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

__all__ = ["survivors_frozen"]


def _collect_and_freeze() -> None:
    gc.collect()    # free the cyclic garbage first: what is frozen is never collected
    gc.freeze()


@contextmanager
def survivors_frozen(*, keep_frozen: bool = False):
    """Freeze what is alive now, and again at each call of the yielded ``checkpoint``.

    Use::

        with survivors_frozen() as checkpoint:
            run_evaluation(..., tick=lambda n=1: (bar.update(n), checkpoint()))

    ``checkpoint(*_)`` (any arguments ignored, so it can stand in for a progress ``tick``) runs
    a full collection and then ``gc.freeze()``; call it where no step's temporaries are alive
    (between iterations or cases), not inside one. Entering does the same once (freezing what
    survives the imports and the set-up).

    On exit the state is restored: ``gc.unfreeze()`` returns the frozen objects to the oldest
    generation, so later collections walk (and can free) them again, and the collector's
    enabled flag is as on entry. If objects were already frozen on entry (someone else's
    freeze), nothing is unfrozen, since Python cannot unfreeze part of the permanent generation.

    ``keep_frozen=True``, for a process that ends right after (``fred``'s own command line,
    :func:`fred.cli.main` without ``argv``): on exit, one more collection and freeze (what the
    last step left), and nothing unfrozen, so the interpreter's shutdown collections skip every
    object instead of walking them all again (about 0.7 s of ``make eval``'s command;
    docs/sysmodel.md, Speed, eighteenth increment). Everything frozen was reachable at a
    freeze, right after a collection.
    """
    enabled = gc.isenabled()
    frozen_before = gc.get_freeze_count()
    _collect_and_freeze()

    def checkpoint(*_ignored) -> None:
        _collect_and_freeze()

    try:
        yield checkpoint
    finally:
        if keep_frozen:
            _collect_and_freeze()     # what the command's last step left, too
        elif frozen_before == 0:
            gc.unfreeze()
        if enabled and not gc.isenabled():
            gc.enable()
        elif not enabled and gc.isenabled():
            gc.disable()
