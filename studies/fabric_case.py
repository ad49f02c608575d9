"""One fabric case for ``fred fabric-sim`` and ``fred fabric-validate`` (docs/fabric_rtl.md): the request
validated, the system model's cycles on the RTL fabric's platform, then the RTL run under
Verilator, and their ratio.

The studies layer is the first that sees both sides (the benches do not import the model and the
model does not import the RTL), so the case lives here; the command line only prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hdl.contracts.errors import FredError
from hdl.contracts.fabric import (IO_OPS, FabricRequest, FabricSpec, fabric_spec,
                                  io_controllers_needed, make_request)

__all__ = ["FabricCase", "build_case", "run_case", "rtl_harness"]


@dataclass(frozen=True)
class FabricCase:
    """A request on a fabric with the model's estimate and (once run, :func:`run_case`) the
    RTL's result; its JSON (``fred fabric-sim --json``) is :meth:`to_dict`."""

    spec: FabricSpec
    request: FabricRequest
    estimate: object                  # sysmodel.fabric_model.FabricEstimate
    rtl: object | None = None         # cocotb_tests.fabric.run.FabricRun
    options: dict = field(default_factory=dict)
    #: the algorithm asked for (None: the model's own choice, which both sides then run)
    algorithm: str | None = None

    @property
    def ratio(self) -> float | None:
        """RTL cycles / model cycles (None before the RTL ran)."""
        return None if self.rtl is None else self.rtl.cycles / self.estimate.cycles

    def to_dict(self) -> dict:
        out = {"fabric": self.spec.to_dict(), "request": self.request.to_dict(),
               "model": self.estimate.to_dict(), "model_platform_toml": self.estimate.platform,
               "options": self.options}
        out["algorithm_chosen_by"] = "model" if self.algorithm is None else "request"
        if self.rtl is not None:
            out["rtl"] = self.rtl.to_dict()
            out["ratio_rtl_over_model"] = self.ratio
        return out


def build_case(*, fabric: str, op: str, size: int, group: str | None = None,
               strategy: str | None = None, dim: str | None = None,
               characterization=None, platform_cache: dict | None = None,
               algorithm: str | None = None, switch: str = "circuit",
               **spec_overrides) -> FabricCase:
    """Validate everything and compute the model's side; nothing is built yet. ``algorithm``:
    the one both sides run (None: the model's own, fastest, choice); ``switch``: the RTL
    fabric's switches the model times (``circuit``, or ``packet``: header-selected phases,
    ``docs/sysmodel.md``). Errors (a group that does
    not fit, size 0, an op or algorithm the fabric cannot run, an unmeasured switch) are
    :class:`FredError` s naming the problem, raised before anything is built."""
    from sysmodel.fabric_model import fabric_platform, model_cycles
    spec = fabric_spec(fabric, **spec_overrides)
    if op in IO_OPS and "io_controllers" not in spec_overrides:
        # one controller per group (hdl.contracts.fabric.IO_OPS), on L1s 0, 1, ...
        spec = fabric_spec(fabric, **spec_overrides,
                           io_controllers=io_controllers_needed(spec, op=op, group=group,
                                                                strategy=strategy, dim=dim))
    request = make_request(spec, op=op, size_flits=size, group=group, strategy=strategy, dim=dim)
    key = (spec, str(characterization), switch)
    cache = platform_cache if platform_cache is not None else {}
    if key not in cache:
        cache[key] = fabric_platform(spec, characterization=characterization, switch=switch)
    estimate = model_cycles(spec, request, platform=cache[key], algorithm=algorithm)
    # the RTL's program of the same algorithm, to fail here (before any build) if the RTL
    # cannot run it
    from hdl.compiler.fabric_program import fabric_program
    fabric_program(spec, request, algorithm=estimate.algorithm)
    return FabricCase(spec, request, estimate, algorithm=algorithm)


def rtl_harness():
    """``run_fabric`` of the fabric's Verilator harness, or a clear error if it is missing."""
    try:
        from cocotb_tests.fabric.run import run_fabric
    except ModuleNotFoundError as exc:
        raise FredError(f"the fabric RTL harness (cocotb_tests.fabric.run) is not available: {exc}; "
                        f"--model-only prints the model's side alone") from None
    return run_fabric


def run_case(case: FabricCase, *, seed: int = 0, sink_backpressure: float = 0.0,
             watchdog_cycles: int | None = None, build_dir=None,
             simulator: str = "lockstep") -> FabricCase:
    """``case`` run on the RTL with the algorithm the model chose, on ``simulator``
    (``cocotb_tests.fabric.run.SIMULATORS``): a new case holding the RTL's result; errors in
    the received data are a :class:`FredError` listing the first few. I/O ops run on the
    packet fabric only (:func:`studies.packet_fabric_case.run_packet_case`)."""
    if case.request.op in IO_OPS:
        raise FredError(f"{case.request.op} runs on the packet fabric's I/O controllers "
                        f"(--switch packet); the circuit fabric has none")
    run_fabric = rtl_harness()   # checks the backpressure before building (fabric_program)
    rtl = run_fabric(case.spec, case.request, algorithm=case.estimate.algorithm, seed=seed,
                     sink_backpressure=sink_backpressure, watchdog_cycles=watchdog_cycles,
                     build_dir=build_dir, simulator=simulator)
    case = replace(case, rtl=rtl, options={**case.options, "seed": seed,
                                           "sink_backpressure": sink_backpressure, "simulator": simulator})
    if case.rtl.errors:
        shown = "; ".join(case.rtl.errors[:5])
        raise FredError(f"{case.spec.name} {case.request.label}: the RTL delivered wrong data "
                        f"({len(case.rtl.errors)} error(s)): {shown}")
    return case
