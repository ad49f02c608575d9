"""The base of the project: pure Python that every other layer may use.

What lives here (imports: the standard library, numpy, and ``hdl.base`` itself, nothing else):

* :mod:`hdl.base.errors` -- :class:`~hdl.base.errors.FredError`, the one error type for bad input;
* :mod:`hdl.base.dtypes` -- the element formats and their bit-exact golden arithmetic;
* :mod:`hdl.base.bitfields` -- bit layouts as tables (flit, microswitch modes, configuration
  word), from which both the Python packers and the RTL's ``StructLayout`` s are made;
* :mod:`hdl.base.flit`, :mod:`hdl.base.config_port`, :mod:`hdl.base.timing` -- the switch's
  contract: its flit, its configuration port and its latency, computed from parameters;
* :mod:`hdl.base.compiler` -- flows, the configuration encoding, the router, the functional
  model and the collective lowering;
* :mod:`hdl.base.placement` -- where each MP/DP/PP rank sits;
* :mod:`hdl.base.characterization` -- the schema of the measured switch data.

The layers above, in order (``tests/test_layering.py`` enforces it): the Amaranth designs
(``hdl`` outside ``hdl.base``); the verification (``cocotb_tests``: benches, runner, Verilator
locator, lint, synthesis and characterization); the system model (``sysmodel``, on the base
only); the command line (``fred``), which nothing imports.
"""
