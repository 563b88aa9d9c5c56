"""Benchmarks: ``gelus bench kernels`` (the activations against torch) and ``gelus bench training``.

Benchmarks print ratios against baselines measured in the same process, rounds interleaved across
candidates, medians over rounds (:mod:`gelus.bench.timing`); they are commands, never timed tests.
"""

__all__: list[str] = []
