"""The contracts every layer shares: pure Python (the standard library, numpy and pydantic, nothing else).

* :mod:`hdl.contracts.errors` -- :class:`~hdl.contracts.errors.FredError`, the one error type for
  bad input;
* :mod:`hdl.contracts.dtypes` -- the element formats and their bit-exact golden arithmetic;
* :mod:`hdl.contracts.bitfields` -- bit layouts as tables (flit, microswitch modes,
  configuration word), from which both the Python packers and the RTL's ``StructLayout`` s are
  made;
* :mod:`hdl.contracts.flit`, :mod:`hdl.contracts.config_port`, :mod:`hdl.contracts.packet`,
  :mod:`hdl.contracts.timing` -- the switch's contract: its flit, its configuration port, the
  packet switch's packets, and its latency, computed from parameters;
* :mod:`hdl.contracts.encoding` -- the configuration encoding: microswitch modes and the
  configuration vector of Fred_m(P), the contract between the compiler and the RTL
  (``docs/configuration.md``);
* :mod:`hdl.contracts.placement` -- where each MP/DP/PP rank sits;
* :mod:`hdl.contracts.fabric`, :mod:`hdl.contracts.fabric_partition` -- the wafer fabric's
  description (variants, link ratios, switch sizes, requests), shared by the fabric RTL and the
  system model, and its cut into two parts for the lock-step simulator;
* :mod:`hdl.contracts.characterization` -- the schema of the measured switch data;
* :mod:`hdl.contracts.input_schema` -- what every input file's schema shares (pydantic base
  model, field types) and the one rule that turns a validation error into a :class:`FredError`
  naming the file, the table and the key.

Above it: :mod:`hdl.compiler` (pure Python), :mod:`hdl.emit`, :mod:`hdl.designs` (Amaranth);
the EDA tooling (:mod:`eda`), the benches (:mod:`cocotb_tests`), the system model
(:mod:`sysmodel`, which uses only ``hdl.contracts`` and ``hdl.compiler``), the studies
(:mod:`studies`) and the command line (:mod:`fred`). ``tests/test_layering.py`` enforces it.
"""
