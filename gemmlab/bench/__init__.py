"""Benchmarks: scripts whose numbers are reported (speed targets live here, not in unit tests)."""
