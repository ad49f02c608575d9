"""Benches and the run of an iteration trace on the fabric RTL (docs/fabric_iteration.md)."""
