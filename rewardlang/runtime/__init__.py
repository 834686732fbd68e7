"""Executing reward programs: the function registry, kernels, batching, caching, sandbox and executor."""
