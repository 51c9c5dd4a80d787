"""Profiler traces -> one event model -> analyses (steps, kernels, categories, HLO attribution)."""
