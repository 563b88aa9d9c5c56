"""Names users arrive with from Hugging Face and timm (gelus/_extra.py), each against its source's
definition written out here from the source (transformers/activations.py, timm/layers/activations.py),
independently of gelus."""

import math

import pytest
import torch
from scipy import special
from torch import nn

import gelus
import gelus.functional as G

F64 = torch.float64
X = torch.cat([torch.linspace(-8, 8, 321, dtype=F64), torch.tensor([12.0, 25.0], dtype=F64)])


# transformers LaplaceActivation.forward(input, mu=0.707107, sigma=0.282095)
def hf_laplace(input, mu=0.707107, sigma=0.282095):
    input = (input - mu).div(sigma * math.sqrt(2.0))
    return 0.5 * (1.0 + torch.erf(input))


# transformers ReLUSquaredActivation
def hf_relu2(input):
    relu_applied = nn.functional.relu(input)
    squared = torch.square(relu_applied)
    return squared


# transformers SqrtSoftplusActivation (DeepSeek-V4)
def hf_sqrtsoftplus(input):
    return torch.sqrt(nn.functional.softplus(input))


# transformers XIELUActivation.__init__ and _xielu_python (its defaults; HF's dtype bf16 -> f64)
class HFXIELU(nn.Module):
    def __init__(self, alpha_p_init=0.8, alpha_n_init=0.8, beta=0.5, eps=-1e-6, dtype=F64):
        super().__init__()
        self.alpha_p = nn.Parameter(
            torch.log(torch.expm1(torch.tensor(alpha_p_init, dtype=dtype))).unsqueeze(0)
        )
        self.alpha_n = nn.Parameter(
            torch.log(torch.expm1(torch.tensor(alpha_n_init - beta, dtype=dtype))).unsqueeze(0)
        )
        self.register_buffer("beta", torch.tensor(beta, dtype=dtype))
        self.register_buffer("eps", torch.tensor(eps, dtype=dtype))

    def forward(self, x):
        alpha_p = nn.functional.softplus(self.alpha_p)
        alpha_n = self.beta + nn.functional.softplus(self.alpha_n)
        return torch.where(
            x > 0,
            alpha_p * x * x + self.beta * x,
            (torch.expm1(torch.min(x, self.eps)) - x) * alpha_n + self.beta * x,
        )


# timm hard_mish(x, inplace=False)
def timm_hard_mish(x, inplace=False):
    if inplace:
        return x.mul_(0.5 * (x + 2).clamp(min=0, max=2))
    return 0.5 * x * (x + 2).clamp(min=0, max=2)


SOURCES = {
    "laplace": hf_laplace,
    "relu2": hf_relu2,
    "sqrtsoftplus": hf_sqrtsoftplus,
    "xielu": HFXIELU(),
    "hard_mish": timm_hard_mish,
}
# the modules hold float32 parameters, as HF's with dtype=torch.float32, then .double()
MODULE_SOURCES = {**SOURCES, "xielu": HFXIELU(dtype=torch.float32).double()}
FUNCTIONS = {
    "laplace": G.laplace,
    "relu2": G.relu2,
    "sqrtsoftplus": G.sqrtsoftplus,
    "xielu": G.xielu,
    "hard_mish": G.hard_mish,
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_name_function_and_module_match_the_source(name):
    module = gelus.get_activation(name).double()
    torch.testing.assert_close(module(X), MODULE_SOURCES[name](X), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(FUNCTIONS[name](X), SOURCES[name](X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_gradients_match_the_source_away_from_kinks(name):
    x = (X + 0.013).clone().requires_grad_()
    y = x.clone().detach().requires_grad_()
    (expected,) = torch.autograd.grad(SOURCES[name](y).sum(), y)
    (got,) = torch.autograd.grad(FUNCTIONS[name](x).sum(), x)
    torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-12)


def test_laplace_keeps_the_lower_tail_where_the_erf_form_cancels():
    x = torch.tensor([-1.0, -2.0, -3.0], dtype=torch.float32)
    assert (hf_laplace(x) == 0).all()  # 1 + erf(z) cancels to 0 in fp32
    y = G.laplace(x)
    truth = torch.from_numpy(special.ndtr((x.double().numpy() - 0.707107) / 0.282095))
    assert (y > 0).all()
    torch.testing.assert_close(y.double(), truth, rtol=2e-5, atol=0)  # fp32 erfc: ≤ ~100 ulp


def test_sqrtsoftplus_value_and_gradient_stay_finite_in_the_far_tail():
    x = torch.tensor([-60.0, -100.0, -200.0], requires_grad=True)
    y = G.sqrtsoftplus(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.isfinite(g).all() and (g >= 0).all()
    torch.testing.assert_close(y.detach(), torch.exp(0.5 * x.detach()))
    y_hf = hf_sqrtsoftplus(x)
    (g_hf,) = torch.autograd.grad(y_hf.sum(), x)
    assert g_hf.isnan().any()  # the source's: √ of an underflowed softplus, inf·0


def test_xielu_is_finite_at_minus_inf_where_the_source_is_nan():
    x = torch.tensor([-math.inf, math.inf, -1e30], dtype=F64)
    assert HFXIELU()(x)[0].isnan()
    y = G.xielu(x)
    assert y[0] == math.inf and y[1] == math.inf and torch.isfinite(y[2])


def test_xielu_module_loads_a_hugging_face_state_dict():
    source = HFXIELU(alpha_p_init=0.6, alpha_n_init=0.9, beta=0.4, eps=-1e-5, dtype=torch.float32)
    module = gelus.XIELU()
    module.load_state_dict(source.state_dict())
    x = torch.linspace(-5, 5, 101)
    torch.testing.assert_close(module(x), source(x), rtol=1e-6, atol=1e-6)
    assert set(module.state_dict()) == {"alpha_p", "alpha_n", "beta", "eps"}


def test_hard_mish_inplace_as_timm():
    x = torch.linspace(-3, 3, 13)
    a, b = x.clone(), x.clone()
    assert G.hard_mish(a, inplace=True) is a
    timm_hard_mish(b, inplace=True)
    torch.testing.assert_close(a, b)
