"""The standard normal CDF Φ and density φ, written so that nothing cancels (docs/NUMERICS.md).

Φ(z) = ½·erfc(−z/√2): for negative z, 1 + erf(z/√2) would cancel (torch's formula returns 0
below z ≈ −5.5 in fp32). ONNX has Erf but no Erfc, so the ONNX route uses
:func:`normal_cdf_rational`, an erfc-free form: erfc(w) = t·exp(−w² + G(t)), t = 1/(1 + w/2),
with G a degree-24 Chebyshev series in 2t − 1 fitted (mpmath, 40 digits) to
log(erfc(w)·exp(w²)/t) on t ∈ [0, 1], i.e. w ∈ [0, ∞], to 2e-15 (the same shape as Numerical
Recipes' erfcc, with more terms). Evaluated in float64 it is within 1.4e-13 relative of Φ down to
z = −38 (the rounding of w² dominates), far below the 6e-8 of an fp32 result.
"""

import torch
from torch import Tensor

from gelus._common import INV_SQRT_2PI, SQRT_HALF

__all__ = ["normal_cdf", "normal_cdf_rational", "normal_pdf"]

# Chebyshev coefficients of G on t ∈ [0, 1] (argument 2t − 1), lowest degree first.
_ERFC_CHEBYSHEV = (
    -0.6513268598908551,
    0.6419697923564909,
    0.019476473204186027,
    -0.009561514786808566,
    -0.0009465953444820969,
    0.0003668394978528634,
    4.2523324806806274e-05,
    -2.0278578112814156e-05,
    -1.6242900045136726e-06,
    1.30365583543464e-06,
    1.5626441705980103e-08,
    -8.523809593878779e-08,
    6.529054422966352e-09,
    5.059343476238978e-09,
    -9.913641902310465e-10,
    -2.2736519916635208e-10,
    9.646761100367303e-11,
    2.394171407638869e-12,
    -6.886210672533431e-12,
    8.945131031976116e-13,
    3.1312232277813533e-13,
    -1.1282673353585269e-13,
    3.1078439477536657e-16,
    7.08830404979045e-15,
    -1.5714884168375e-15,
)


_SCALE = 2.0**50


def normal_cdf(z: Tensor) -> Tensor:
    """Φ(z) = ½·erfc(−z/√2), in z's dtype."""
    return 0.5 * torch.special.erfc(z * -SQRT_HALF)


def normal_pdf(z: Tensor) -> Tensor:
    """φ(z) = exp(−z²/2)/√(2π), in z's dtype."""
    return torch.exp(-0.5 * z * z) * INV_SQRT_2PI


def _erfc_nonnegative(w: Tensor) -> Tensor:
    """erfc(w) for w ≥ 0 (and +inf) without erf or erfc: t·exp(−w² + G(t))."""
    t = 1.0 / (1.0 + 0.5 * w)
    u = 2.0 * t - 1.0
    # Clenshaw's recurrence for Σ c_k·T_k(u). Two ONNX workarounds: the coefficients are tensors
    # of w's dtype (the exporter stores a Python float operand as a float32 constant, even in a
    # float64 op), scaled by 2^50 (exact) and divided back at the end (onnxscript's optimizer,
    # run by torch.onnx.export, drops the addition of a constant below ~1e-8 as if it were 0).
    coefficients = [w.new_tensor(c * _SCALE) for c in _ERFC_CHEBYSHEV]
    b2 = coefficients[-1]
    b1 = 2.0 * u * b2 + coefficients[-2]
    for coefficient in reversed(coefficients[1:-2]):
        b1, b2 = 2.0 * u * b1 - b2 + coefficient, b1
    series = (u * b1 - b2 + coefficients[0]) / _SCALE
    return t * torch.exp(series - w * w)


def normal_cdf_rational(z: Tensor) -> Tensor:
    """Φ(z) without erfc and without cancellation, in z's dtype (pass float64: 1.4e-13 relative).

    Made of ops every ONNX runtime has (Neg, Div, Mul, Add, Exp, Where): the ONNX route of the
    accurate exact GELU and the generalized GELU. Φ(±inf) = 1 / 0, Φ(nan) = nan.
    """
    w = z * z.new_tensor(-SQRT_HALF)  # √½ to z's precision (see above)
    upper = w >= 0
    half = 0.5 * _erfc_nonnegative(torch.where(upper, w, -w))  # |w|, with slope ±1 at 0
    return torch.where(upper, half, 1.0 - half)
