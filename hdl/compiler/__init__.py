"""The FRED configuration compiler: flows, collectives, routing onto Fred_m(P), the
configuration encoding, and a bit-accurate functional model.

Public API (see ``docs/configuration.md`` for the encoding)::

    from hdl.compiler import Flow, route, lower_collective, Phase, RouteResult, SwitchConfig
    from hdl.compiler.functional import simulate, symbolic, check_config
"""

from hdl.contracts.encoding import (DEFAULT_WORD_WIDTH, RD_IN0, RD_IN1, RD_NONE, RD_SUM, InputMode,
                                   OutputMode, RDMode, Slot, SwitchConfig, config_bits, layout,
                                   microswitch_count, wire_bits)
from hdl.compiler.flows import Flow, format_flows, parse_flows, validate_flows

__all__ = [
    "Flow", "parse_flows", "format_flows", "validate_flows",
    "SwitchConfig", "InputMode", "OutputMode", "RDMode", "Slot", "layout", "config_bits",
    "microswitch_count", "wire_bits", "RD_NONE", "RD_IN0", "RD_IN1", "RD_SUM", "DEFAULT_WORD_WIDTH",
]

from hdl.compiler.router import Phase, RouteResult, Router, phase_count, route, route_one_phase  # noqa: E402
from hdl.compiler.functional import check_config, check_numeric, simulate, symbolic, verify_config  # noqa: E402

__all__ += ["Phase", "RouteResult", "Router", "route", "phase_count", "route_one_phase",
            "check_config", "check_numeric", "simulate", "symbolic", "verify_config"]
from hdl.compiler.collectives import (COLLECTIVES, Schedule, Transfer, lower_collective,  # noqa: E402
                                      schedule_collective)

__all__ += ["COLLECTIVES", "Schedule", "Transfer", "lower_collective", "schedule_collective"]
