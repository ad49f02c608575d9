"""The wafer fabric of issue 15 under Verilator: ``run_fabric``, the lock-step simulator (the
default) and the one-model cocotb bench."""
