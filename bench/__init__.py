"""Benchmarks for run_mcp (issue 7): `python bench/run.py [--smoke] [--json PATH]`."""
