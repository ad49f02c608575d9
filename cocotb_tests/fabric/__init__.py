"""The wafer fabric RTL under simulation: ``run_fabric`` (:mod:`cocotb_tests.fabric.run`) runs
one fabric program on the lock-step simulator (the default, :mod:`eda.fabric.lockstep`) or on the
one-model cocotb bench (:mod:`cocotb_tests.fabric.bench_fabric`)."""
