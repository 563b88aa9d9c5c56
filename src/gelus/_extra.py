"""Activations users arrive with by name from other libraries, as compositions of torch ops.

Each follows its source's definition (tests/library/test_extra.py writes the sources out), with its
arithmetic arranged so that nothing cancels or overflows where the source's does (noted per
function); as plain torch ops they work with torch.func, export, ONNX and compile as they are.
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from gelus._common import check_floating, compute_dtype, result_dtype
from gelus._operator import fx_leaf, route
from gelus._phi import normal_cdf, normal_cdf_rational

__all__ = ["hard_mish", "laplace", "relu2", "sqrtsoftplus", "xielu"]

LAPLACE_MU = 0.707107  # Hugging Face LaplaceActivation (MEGA): Φ((x − μ)/σ)
LAPLACE_SIGMA = 0.282095
_SOFTPLUS_TAIL = -40.0  # below: softplus(x) = e^x to 4e-18 relative, and √ = e^(x/2)


@fx_leaf
def laplace(x: Tensor, mu: float = LAPLACE_MU, sigma: float = LAPLACE_SIGMA) -> Tensor:
    """Φ((x − μ)/σ) (MEGA's attention activation; HF ``laplace``), via erfc: no cancellation in
    the lower tail, where HF's ``0.5·(1 + erf(·))`` returns 0 below x ≈ −0.85 in fp32 (in ONNX,
    which has no erfc: the erfc-free Φ of :mod:`gelus._phi` in float64)."""
    check_floating("laplace", x)
    if route(x) == "onnx":
        return normal_cdf_rational((x.to(torch.float64) - mu) / sigma).to(x.dtype)
    return normal_cdf((x.to(compute_dtype(x.dtype)) - mu) / sigma).to(x.dtype)


@fx_leaf
def relu2(x: Tensor) -> Tensor:
    """relu(x)² (Primer; HF ``relu2``)."""
    check_floating("relu2", x)
    return torch.square(F.relu(x))


@fx_leaf
def sqrtsoftplus(x: Tensor) -> Tensor:
    """√softplus(x) (HF ``sqrtsoftplus``, DeepSeek-V4's router score).

    Below x = −40 it is computed as e^(x/2), equal to float64 rounding: the value stays normal
    and the gradient finite where √softplus underflows (its gradient would be inf·0 = nan).
    """
    check_floating("sqrtsoftplus", x)
    tail = x < _SOFTPLUS_TAIL
    low = torch.where(tail, x, _SOFTPLUS_TAIL)
    high = torch.where(tail, _SOFTPLUS_TAIL, x)
    return torch.where(tail, torch.exp(0.5 * low), torch.sqrt(F.softplus(high)))


@fx_leaf
def xielu(
    x: Tensor,
    alpha_p: Tensor | float = 0.8,
    alpha_n: Tensor | float = 0.8,
    beta: float = 0.5,
    eps: float = -1e-6,
) -> Tensor:
    """xIELU (Huang et al. 2024; HF ``xielu``, Apertus) with its positive coefficients.

    x > 0: α_p·x² + β·x;  x ≤ 0: (expm1(min(x, ε)) − x)·α_n + β·x, written as
    expm1(min(x, ε))·α_n + x·(β − α_n), which is −inf → +inf (HF's form is inf − inf = nan there).
    ``alpha_p`` and ``alpha_n`` are the coefficients themselves (HF stores their softplus-inverse;
    :class:`gelus.XIELU` does too). Computed in the compute dtype of the tensor operands (float32
    for half types, as every member) and rounded once to their promoted dtype.
    """
    operands = (x, alpha_p, alpha_n, beta, eps)
    check_floating("xielu", *operands)
    dtype = result_dtype(*operands)
    compute = compute_dtype(*(t.dtype for t in operands if isinstance(t, Tensor)))
    x, alpha_p, alpha_n, beta, eps = (
        t.to(compute) if isinstance(t, Tensor) else t for t in operands
    )
    up = x > 0
    xp = torch.where(up, x, 0.0)  # each branch sees only its own side: no inf·0 in the
    xn = torch.where(up, 0.0, x)  # gradient of the branch that is not taken
    positive = (alpha_p * xp + beta) * xp
    negative = torch.expm1(torch.clamp(xn, max=eps)) * alpha_n + xn * (beta - alpha_n)
    return torch.where(up, positive, negative).to(dtype)


@fx_leaf
def hard_mish(x: Tensor, inplace: bool = False) -> Tensor:
    """½·x·clamp(x + 2, 0, 2) (timm ``hard_mish``); ``inplace`` writes into x as timm does."""
    check_floating("hard_mish", x)
    if inplace:
        return x.mul_(0.5 * (x + 2).clamp(min=0, max=2))
    return 0.5 * x * (x + 2).clamp(min=0, max=2)


def _softplus_inverse(value: Tensor) -> Tensor:
    """log(expm1(v)): the raw parameter whose softplus is v (HF's xIELU parametrization)."""
    return torch.log(torch.expm1(value))
