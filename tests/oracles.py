"""The float64 oracles of the library's tests, in one place: numpy, scipy and mpmath, written
independently of the code under test (tests/conftest.py's table of members, the Triton kernels'
tests and the members' own tests all take theirs from here)."""

import math

import numpy as np
import torch
from scipy import special

SQRT_2PI = math.sqrt(2.0 * math.pi)
TANH_A = 2.0 * math.sqrt(2.0 / math.pi)


def exact(x):
    return x * special.ndtr(x)


def exact_slope(x):
    return special.ndtr(x) + x * np.exp(-0.5 * x * x) / SQRT_2PI


def tanh_form(x):  # = x/2·(1 + tanh(√(2/π)(x + 0.044715x³))), without the cancellation
    return x * special.expit(TANH_A * (x + 0.044715 * x**3))


def tanh_slope(x):
    s = special.expit(TANH_A * (x + 0.044715 * x**3))
    return s + x * TANH_A * (1.0 + 3.0 * 0.044715 * x * x) * s * (1.0 - s)


def swish(beta):
    return lambda x: x * special.expit(beta * x)


def swish_slope(beta):
    def slope(x):
        s = special.expit(beta * x)
        return s + beta * x * s * (1.0 - s)

    return slope


def laplace(x):  # Hugging Face LaplaceActivation: 0.5·(1 + erf((x − μ)/(σ√2)))
    return special.ndtr((x - 0.707107) / 0.282095)


def laplace_slope(x):
    z = (x - 0.707107) / 0.282095
    return np.exp(-0.5 * z * z) / SQRT_2PI / 0.282095


def relu(x):
    return np.maximum(x, 0.0)


def relu_slope(x):
    return (x > 0).astype(np.float64)


def relu2(x):
    return np.maximum(x, 0.0) ** 2


def relu2_slope(x):
    return 2.0 * np.maximum(x, 0.0)


def sqrtsoftplus(x):
    return np.sqrt(np.logaddexp(0.0, x))


def sqrtsoftplus_slope(x):
    return special.expit(x) / (2.0 * np.sqrt(np.logaddexp(0.0, x)))


def xielu(x, alpha_p=0.8, alpha_n=0.8, beta=0.5, eps=-1e-6):  # HF XIELUActivation._xielu_python
    return np.where(
        x > 0,
        alpha_p * x * x + beta * x,
        (np.expm1(np.minimum(x, eps)) - x) * alpha_n + beta * x,
    )


def xielu_slope(x, alpha_p=0.8, alpha_n=0.8, beta=0.5, eps=-1e-6):
    inside = np.where(x < eps, np.exp(np.minimum(x, eps)), 0.0)
    return np.where(x > 0, 2 * alpha_p * x + beta, (inside - 1.0) * alpha_n + beta)


def hard_mish(x):  # timm: 0.5·x·(x + 2).clamp(0, 2)
    return 0.5 * x * np.clip(x + 2.0, 0.0, 2.0)


def hard_mish_slope(x):
    inside = (x > -2.0) & (x < 0.0)
    return np.where(inside, x + 1.0, np.where(x >= 0.0, 1.0, 0.0))


silu = swish(1.0)


# ------------------------------------------------------------------ gated units, float64 torch ops
# Functions of a float64 torch tensor x = [a, b] on ``dim`` (differentiable by autograd), as
# gelus._members names them for the gated members: the tests and tools/gpu_check.py use them.


def _split(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    h = x.movedim(dim, -1)
    return h[..., : h.shape[-1] // 2], h[..., h.shape[-1] // 2 :]


def geglu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """a·b·Φ(b), Φ(b) = ½·erfc(−b/√2)."""
    a, b = _split(x, dim)
    return (a * b * 0.5 * torch.special.erfc(-b / math.sqrt(2.0))).movedim(-1, dim)


def swiglu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """a·b·σ(b)."""
    a, b = _split(x, dim)
    return (a * b * torch.sigmoid(b)).movedim(-1, dim)


def reglu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """a·max(b, 0)."""
    a, b = _split(x, dim)
    return (a * torch.clamp(b, min=0.0)).movedim(-1, dim)


def clamped_swiglu(x: torch.Tensor, alpha=1.702, limit=7.0, interleaved=True, dim=-1):
    """GPT-OSS's gate, transformers' ``GptOssExperts._apply_gate`` written again: from gate, up
    (interleaved: x[..., ::2], x[..., 1::2] on dim; else the halves, the gate first),
    (clamp(up, ±L) + 1)·g·σ(α·g), g = min(gate, L); torch's clamp (the gradient passes at the
    bounds, 0 beyond)."""
    h = x.movedim(dim, -1)
    if interleaved:
        gate, up = h[..., ::2], h[..., 1::2]
    else:
        gate, up = _split(h, -1)
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    return ((up + 1) * (gate * torch.sigmoid(gate * alpha))).movedim(-1, dim)


# ------------------------------------------------------------------ GELU by form, and its slope


def cdf(x):
    return 0.5 * special.erfc(-x / math.sqrt(2.0))


def pdf(x):
    return np.exp(-0.5 * x * x) / SQRT_2PI


def tanh_z(x):
    a = 2.0 * math.sqrt(2.0 / math.pi)
    return x * a * (1.0 + 0.044715 * x * x), a * (1.0 + 3 * 0.044715 * x * x)


def gelu_oracle(x, approximate="none"):
    """(value, slope) of GELU in the given form, float64."""
    with np.errstate(all="ignore"):
        if approximate == "none":
            return x * cdf(x), cdf(x) + x * pdf(x)
        if approximate == "tanh":
            z, dz = tanh_z(x)
            s = special.expit(z)
            return x * s, s + x * dz * s * (1 - s)
        z = 1.702 * x
        s = special.expit(z)
        return x * s, s + z * s * (1 - s)


def mpmath_oracle(points, digits: int = 40):
    """(x·Φ(x), Φ(x) + x·φ(x)) to ``digits`` digits, rounded to float64."""
    import mpmath

    value, slope = np.empty(len(points)), np.empty(len(points))
    with mpmath.workdps(digits):
        for i, p in enumerate(points):
            x = mpmath.mpf(float(p))
            cdf = mpmath.ncdf(x)
            value[i] = float(x * cdf)
            slope[i] = float(cdf + x * mpmath.npdf(x))
    return value, slope


def ulp_error(result: torch.Tensor, reference: np.ndarray) -> np.ndarray:
    """|result − reference| in units of the spacing of the result's dtype at the reference."""
    np_dtype = {torch.float32: np.float32, torch.float64: np.float64}[result.dtype]
    spacing = np.spacing(np.abs(reference).astype(np_dtype)).astype(np.float64)
    return np.abs(result.double().cpu().numpy() - reference) / spacing


# ------------------------------------------------------------------ generalized GELU


def generalized(x, mu, sigma):
    """x·Φ((x − μ)/σ) with scipy's ndtr."""
    x, mu, sigma = (np.asarray(v, dtype=np.float64) for v in (x, mu, sigma))
    return x * special.ndtr((x - mu) / sigma)


def generalized_grads(x, mu, sigma):
    """∂/∂x, ∂/∂μ, ∂/∂σ of x·Φ((x − μ)/σ)."""
    x, mu, sigma = (np.asarray(v, dtype=np.float64) for v in (x, mu, sigma))
    z = (x - mu) / sigma
    pdf = np.exp(-0.5 * z * z) / SQRT_2PI
    return special.ndtr(z) + x * pdf / sigma, -x * pdf / sigma, -x * pdf * z / sigma
