"""Benchmarks: each ``bench_*.py`` prints figures and ratios against a named baseline."""
