"""cocotb benches that verify the generated Verilog under Verilator.

* :mod:`cocotb_tests.lib` -- our small verification library (stream agents with idle and
  backpressure generators, a tagged scoreboard, a watchdog, seeds);
* :mod:`cocotb_tests.runner` -- :func:`~cocotb_tests.runner.run_bench`, which builds a DUT once
  per configuration into ``sim_build/<hash>/`` and runs a cocotb module on it (pytest calls it);
* ``bench_*.py`` -- the cocotb test modules, one per design.
"""
