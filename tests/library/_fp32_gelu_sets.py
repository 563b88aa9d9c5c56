"""The accuracy sets of the float32 exact GELU and their oracles, computed once per session and
shared by the tests of the Triton kernels and of the torch composition (gelus._gelu_float32).

- a dense grid: 1,000,001 points evenly on [−14.5, 10] (to where value and slope underflow) and
  200,000 uniform on [−16, 16], against float64 scipy (erfc of a float64 argument: its rounding
  costs ~x²·2^-53, far below a float32 ulp);
- spot sets against 50-digit mpmath: the 513 float32 values around the slope's zero
  x₀ = −0.7517915…, powers of two and their neighbours from the least subnormal to 2^-8 (both
  signs), 2,001 points across the underflow band [−15.5, −13.5], and 100,000 random finite
  float32 bit patterns.
"""

import functools

import numpy as np

from oracles import gelu_oracle, mpmath_oracle

__all__ = ["EXACT_ULP", "assert_within_exact_ulp", "dense_grid", "spot_sets"]

EXACT_ULP = 2.0  # the contract for fp32 value and slope (docs/CUDA.md)
SLOPE_ROOT = -0.7517915246935645


@functools.cache
def dense_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x as float32, value, slope) on the dense grid."""
    rng = np.random.default_rng(20261126)
    x = np.concatenate([np.linspace(-14.5, 10, 1_000_001), rng.uniform(-16, 16, 200_000)])
    x = x.astype(np.float32)
    value, slope = gelu_oracle(x.astype(np.float64))
    return x, value, slope


def _spot_points() -> np.ndarray:
    root = np.float32(SLOPE_ROOT)
    around_root = root + np.arange(-256, 257) * np.spacing(root)
    powers = 2.0 ** np.arange(-149, -7, dtype=np.float64)
    tiny = np.concatenate([powers, np.nextafter(powers.astype(np.float32), np.float32(1))])
    band = np.linspace(-15.5, -13.5, 2001)
    bits = np.random.default_rng(7).integers(0, 2**32, 110_000, dtype=np.uint64)
    patterns = bits.astype(np.uint32).view(np.float32)
    patterns = patterns[np.isfinite(patterns)][:100_000]
    points = np.concatenate([around_root, tiny, -tiny, band, patterns]).astype(np.float32)
    return np.unique(points)


@functools.cache
def spot_sets() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x as float32, value, slope) on the spot sets, against 50-digit mpmath."""
    x = _spot_points()
    value, slope = mpmath_oracle(x.astype(np.float64), digits=50)
    return x, value, slope


def assert_within_exact_ulp(x32: np.ndarray, value_error: np.ndarray, slope_error: np.ndarray):
    """Value and slope within EXACT_ULP everywhere; a failure names the worst input."""
    assert value_error.max() <= EXACT_ULP, x32[value_error.argmax()]
    assert slope_error.max() <= EXACT_ULP, x32[slope_error.argmax()]
