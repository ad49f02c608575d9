"""cocotb benches that verify the generated Verilog under Verilator, and what they need.

* ``bench_*.py`` (and :mod:`cocotb_tests.fabric.bench_fabric`) -- the cocotb test modules, one
  per design;
* :mod:`cocotb_tests.lib` -- our verification library (stream agents with idle and
  backpressure generators, a tagged scoreboard, a watchdog, seeds, coverage);
* :mod:`cocotb_tests.runner` -- :func:`~cocotb_tests.runner.run_bench`, which builds a DUT once
  per configuration into ``sim_build/<hash>/`` and runs a cocotb module on it;
* :mod:`cocotb_tests.fabric.run` -- ``run_fabric``: a fabric program on the RTL under either
  simulator (the lock-step build of :mod:`eda.fabric` or the cocotb bench);
* harnesses the benches and tests share: :mod:`cocotb_tests.adder_vectors`,
  :mod:`cocotb_tests.exhaustive`, :mod:`cocotb_tests.fault_injector`, :mod:`cocotb_tests.cosim`
  (flat against hierarchical Verilog), :mod:`cocotb_tests.packet_sim` (the packet switch in
  the Amaranth simulator).

Imports: :mod:`hdl`, :mod:`eda`, cocotb.
"""
