"""Benchmarks: each prints its figures, a ratio against a baseline measured in the same run,
and a ``key=value`` last line. Run them from the repository root as modules, e.g.
``python -m benchmarks.bench_throughput``; what they share is in :mod:`benchmarks.harness`."""
