"""The workloads of benchmarks/throughput.py, one module each, on shared timing helpers (common.py)
and minimal baseline loops (minimal.py)."""
