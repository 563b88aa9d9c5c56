"""Φ and φ (gelus/_phi.py): the erfc form, and the erfc-free form of the ONNX route."""

import math

import numpy as np
import torch
from scipy import special

from gelus._phi import normal_cdf, normal_cdf_rational, normal_pdf


def test_erfc_form_does_not_cancel_in_the_negative_tail():
    z = torch.linspace(-37, 8, 9001, dtype=torch.float64)
    np.testing.assert_allclose(normal_cdf(z).numpy(), special.ndtr(z.numpy()), rtol=1e-13)
    np.testing.assert_allclose(
        normal_pdf(z).numpy(), np.exp(-0.5 * z.numpy() ** 2) / math.sqrt(2 * math.pi), rtol=1e-14
    )


def test_erfc_free_form_in_float64_to_1e13():
    # the ONNX route's Φ (ONNX has Erf, no Erfc): a Chebyshev series for erfc·exp(w²)/t
    z = torch.linspace(-38, 38, 200_001, dtype=torch.float64)
    expected = special.ndtr(z.numpy())
    normal = expected > np.finfo(np.float64).tiny  # scipy's own result is subnormal below
    relative = np.abs(normal_cdf_rational(z).numpy()[normal] / expected[normal] - 1)
    assert relative.max() < 2e-13
    edges = normal_cdf_rational(torch.tensor([math.inf, -math.inf, math.nan], dtype=torch.float64))
    assert edges[0] == 1 and edges[1] == 0 and edges[2].isnan()


def test_erfc_free_form_is_differentiable():
    z = torch.linspace(-6, 6, 25, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(normal_cdf_rational, (z,))
