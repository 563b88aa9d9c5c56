"""Smaller behaviours where the library now does what torch (or Hugging Face) does, or pins where it
chooses to differ: half types of xIELU, forward-over-reverse dtypes, the registry's error for
None, geglu's dim error, channels_last (issue 21, point 4)."""

import numpy as np
import pytest
import torch

import gelus.functional as G
from conftest import xielu as xielu_oracle


def every_finite(dtype, bound):
    """Every finite value of a 16-bit float type with |x| <= bound."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    return bits[torch.isfinite(bits) & (bits.abs() <= bound)]


@pytest.mark.parametrize(
    ("dtype", "bound"),
    # fp16 overflows at 65504: α_p·x² + β·x stays below it for x <= 250
    [(torch.bfloat16, 1e3), (torch.float16, 250.0)],
    ids=str,
)
def test_xielu_half_types_are_computed_in_float32_and_rounded_once(dtype, bound):
    x = every_finite(dtype, bound)
    y = G.xielu(x)
    assert y.dtype == dtype
    expected = xielu_oracle(x.double().numpy())
    error = np.abs(y.double().numpy() - expected)
    # one rounding of the float32 result: within one unit in the last place (2^-8 relative for
    # bf16, 2^-11 for fp16; bf16 in bf16 arithmetic was off by up to 100 %)
    # (and one spacing of the subnormals near zero)
    ulp = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    tiny = 2 * ulp * torch.finfo(dtype).smallest_normal
    assert (error <= ulp * np.abs(expected) + tiny).all()


def test_xielu_module_keeps_torch_promotion_of_its_float32_parameters():
    module = __import__("gelus").XIELU()
    x = torch.randn(3, 4, dtype=torch.bfloat16)
    assert module(x).dtype == torch.float32  # [1]-shaped float32 parameters promote, as in torch
    assert G.xielu(x).dtype == torch.bfloat16  # Python-float parameters do not
