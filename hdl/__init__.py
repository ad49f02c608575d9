"""Amaranth designs of the FRED switch and its configuration compiler.

* :mod:`hdl.base.dtypes` -- the element formats the switch reduces (fp16, bf16, fp32,
  int32) and their bit-exact golden arithmetic, shared by every test and model;
* :mod:`hdl.stream_buffer` -- a full-throughput registered stream buffer;
* :mod:`hdl.designs` -- the registry of top-level designs ``fred verilog`` emits;
* :mod:`hdl.verilog` -- deterministic Verilog generation;
* :mod:`cocotb_tests.lint` -- Verilator ``--lint-only`` with the project's waivers.
"""
