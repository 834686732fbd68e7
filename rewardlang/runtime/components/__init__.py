"""rewardlang's own reward functions, one module per family; every module here is imported by the registry.

Adding a function: write a module here that registers it with :func:`rewardlang.runtime.api.function`, a test
in ``tests/runtime/components/``, and an example spec. No compiler file changes.
"""
