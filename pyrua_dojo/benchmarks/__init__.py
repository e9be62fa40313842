"""Benchmarks: each `pyrua-dojo bench <kind>` is one module here and prints its figures.

The top of the layer map: a benchmark may import anything (the twin, the agent runtime, the plugin, the servers),
and nothing outside this package imports a benchmark (tests may).
"""
