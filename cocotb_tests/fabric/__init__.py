"""The wafer fabric of issue 15 under Verilator: the bench and ``run_fabric``."""
