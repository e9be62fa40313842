"""Benchmarks: each `pyrua-dojo bench <kind>` is one module here and prints its figures.

The top of the layer map, beside the command line that dispatches to it: a benchmark may import anything (the twin,
the agent runtime, the plugin, the servers); nothing but `pyrua_dojo.cli` (and tests) imports a benchmark.
"""
