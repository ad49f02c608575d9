"""The reduction unit (lane-parallel stream adder) and its per-format datapaths.

``ReductionUnit(dtype=, lanes=, sideband=)`` is the block the switch instantiates;
``FloatAdder`` / ``IntAdder`` are one lane's pipelined datapath; ``FloatFormat`` /
``IntFormat`` their configuration.
"""

from .float_adder import FloatAdder
from .formats import FloatFormat, IntFormat, adder_format
from .int_adder import IntAdder
from .reduction_unit import MAX_LANES, ReductionUnit

__all__ = ["ReductionUnit", "MAX_LANES", "FloatAdder", "IntAdder", "FloatFormat", "IntFormat",
           "adder_format"]
