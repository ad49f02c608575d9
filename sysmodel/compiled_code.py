"""The model's compiled (numba) functions, loaded together before anything is timed (issue 31:
a cold first run -- numba's compilation on a fresh clone, or loading its cached machine code --
is stated apart from what a benchmark or ``fred validate``'s cases measure).

One list, so that ``fred validate``'s start-up and both of ``make bench-sysmodel``'s sections
load the same functions: the engine's loop (:mod:`sysmodel.engine_compiled`, first: importing
it loads numba's NumPy support without the BLAS probe), the pipeline schedule's round-robin
(:mod:`sysmodel.schedule_order_compiled`), the breakdown's sweeps
(:mod:`sysmodel.breakdown_compiled`), the mesh chunks' stage schedule
(:mod:`sysmodel.stage_schedule_compiled`) and the switches a transfer holds
(:mod:`sysmodel.switch_links_compiled`).
"""

from __future__ import annotations

__all__ = ["warm_up_all"]


def warm_up_all() -> list[tuple[str, float, bool]]:
    """Load (or, without a cached copy, compile) every compiled function of the model, in
    order: per function ``(what, wall seconds it took, whether it compiled)``."""
    from sysmodel.engine_compiled import warm_up as engine
    from sysmodel.schedule_order_compiled import warm_up as order
    from sysmodel.breakdown_compiled import warm_up as breakdown
    from sysmodel.stage_schedule_compiled import warm_up as stage_schedule
    from sysmodel.switch_links_compiled import warm_up as switch_links
    return [(what, *load()) for what, load in
            (("engine", engine), ("pipeline order", order), ("breakdown", breakdown),
             ("stage schedule", stage_schedule), ("switch links", switch_links))]
