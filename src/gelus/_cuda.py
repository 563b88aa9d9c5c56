"""The members' CUDA kernels: the Triton kernels of :mod:`gelus._triton`, registered as the "cuda"
implementation of the operators, one table (:data:`CUDA_KERNELS`), through ``torch.library``.

Eager CUDA tensors take them with no ``torch.compile``. Compiled graphs on CUDA hold each
pointwise member's composition of aten ops, which inductor fuses with its neighbours (a bias add,
casts, the gradient's product); only the members in :data:`COMPILED_AS_OPERATORS` keep their
operators there (:func:`gelus._operator.keep_operator_under_compile`; fake kernels, so no graph
break). Registering imports no Triton: the kernels load the first time a CUDA tensor meets a
member.

A call the kernels do not take (an integer dtype, parameters that are neither scalars nor per
channel, mixed dtypes that promote) runs the operator's default kernel, as on any device. The
parameter gradients of bias-GELU, tensor-β Swish and generalized GELU (``bias_gelu_grads``,
``swish_tensor_backward``, ``generalized_gelu_backward``: dx and the parameters' gradients from
one pass over the gradient, summed on the device) and stochastic GELU's seeded mask
(``stochastic_gelu``, ``stochastic_gelu_backward``) are operators too, which the members call
on a device that registers a kernel for them (docs/CUDA.md).

The kernels' accuracy is docs/CUDA.md's table, the CPU routes' docs/NUMERICS.md's ("Accuracy").
"""

from collections.abc import Callable

import torch
from torch import Tensor

from gelus import _bias_gelu, _geglu, _gelu, _generalized, _members, _stochastic, _swish, _triton
from gelus._operator import keep_operator_under_compile
from gelus._torch_compat import is_plain

__all__ = ["COMPILED_AS_OPERATORS", "CUDA_KERNELS", "register"]

_kernels = _triton.host_functions  # the Triton host functions for this call, or None


def gelu(x, approximate="none", accurate=False):
    ops = _kernels(x)
    if ops is None:
        return _gelu.kernel_forward(x, approximate, accurate)
    return ops.gelu_forward(x, approximate)


def gelu_backward(grad, x, approximate="none", accurate=False):
    ops = _kernels(x)
    if ops is None or grad.dtype != x.dtype:
        return _gelu.kernel_backward(grad, x, approximate, accurate)
    return ops.gelu_backward(grad, x, approximate)


def swish(x, beta=1.0):
    ops = _kernels(x)
    if ops is None:
        return _swish.forward(x, beta)
    return ops.swish_forward(x, beta)


def swish_backward(grad, x, beta=1.0):
    ops = _kernels(x)
    if ops is None or grad.dtype != x.dtype:
        return _swish.backward(grad, x, beta)
    return ops.swish_backward(grad, x, beta)[0]


def swish_tensor(x, beta):
    ops = _kernels(x, beta)
    if ops is None:
        return _swish.tensor_kernel(x, beta)
    return ops.swish_forward(x, beta)


def generalized_gelu(x, mu, sigma):
    ops = _kernels(x, mu, sigma)
    if ops is None:
        return _generalized.forward(x, mu, sigma)
    # σ ≤ 0 gives nan (in the kernel), as on every route that cannot refuse it (no sync here)
    return ops.generalized_gelu_forward(x, mu, sigma)


def bias_gelu(x, bias, approximate="none", accurate=False):
    ops = _kernels(x, bias)
    if ops is None:
        return _bias_gelu.kernel_forward(x, bias, approximate, accurate)
    return ops.bias_gelu_forward(x, bias, approximate)


def bias_gelu_backward(grad, x, bias, approximate="none", accurate=False):
    ops = _kernels(x, bias)
    if ops is None or grad.dtype != x.dtype:
        return _bias_gelu.kernel_backward(grad, x, bias, approximate, accurate)
    return ops.bias_gelu_backward(grad, x, bias, approximate, bias_grad=False)[0]


def geglu(x, dim=-1, approximate="none", accurate=False):
    ops = _kernels(x)
    if ops is None:
        return _geglu.kernel_forward(x, dim, approximate, accurate)
    return ops.geglu_forward(x, dim, approximate)


def geglu_backward(grad, x, dim=-1, approximate="none", accurate=False):
    ops = _kernels(x)
    if ops is None or grad.dtype != x.dtype:
        return _geglu.kernel_backward(grad, x, dim, approximate, accurate)
    grad_x = ops.geglu_backward(grad, x, dim, approximate)  # contiguous
    # in x's memory format (channels_last stays so), as the default and fake kernels give it
    return grad_x if x.is_contiguous() else torch.empty_like(x).copy_(grad_x)


# ---------------------------------------------------------------- parameter gradients
# One kernel pass gives dx and per-program partial sums of dμ, dσ (dβ, dbias), which a second,
# tiny kernel adds up: no torch op reduces anything after the kernels.


def _same(grad: Tensor, x: Tensor) -> bool:
    return grad.dtype == x.dtype and grad.shape == x.shape


def generalized_gelu_backward(grad, x, mu, sigma):
    ops = _kernels(x, mu, sigma)
    if ops is None or not _same(grad, x) or not is_plain(grad):
        return _generalized.composed_backward(grad, x, mu, sigma)
    return ops.generalized_gelu_backward(grad, x, mu, sigma)  # σ ≤ 0: nan, in the kernel


def swish_tensor_backward(grad, x, beta):
    ops = _kernels(x, beta)
    if ops is None or not _same(grad, x) or not is_plain(grad):
        return _swish.tensor_composed_backward(grad, x, beta)
    return ops.swish_backward(grad, x, beta)


def bias_gelu_grads(grad, x, bias, approximate="none", accurate=False):
    ops = _kernels(x, bias)
    if ops is None or not _same(grad, x) or not is_plain(grad):
        return _bias_gelu.composed_grads(grad, x, bias, approximate, accurate)
    return ops.bias_gelu_backward(grad, x, bias, approximate)


# ---------------------------------------------------------------- stochastic GELU
# The mask: uniform number i (memory order) of the Philox stream ``seed`` below Φ(x_i); the
# backward regenerates it. seed: a one-element CPU tensor < 2^31 (the member draws it so).


def stochastic_gelu(x, seed):
    if _kernels(x) is None:
        return _stochastic.seeded_forward(x, seed)
    return _triton.load().stochastic_gelu_forward(x, _stochastic.seed_value(seed), 0)


def stochastic_gelu_backward(grad, x, seed):
    # Decided by x alone, as the forward was: the mask must be the one the forward drew.
    if _kernels(x) is None:
        return _stochastic.seeded_backward(grad, x, seed)
    seed = _stochastic.seed_value(seed)
    return _triton.load().stochastic_gelu_backward(grad.to(x.dtype), x, seed, 0)


# operator -> its CUDA kernel: every member's (gelus._members: those above, and the kernels of
# members whose CUDA code is their own)
CUDA_KERNELS: dict[object, Callable] = _members.cuda_kernels()


# The members whose compiled CUDA graphs call their operators (the Triton kernels) instead of a
# composition inductor fuses: where the hand kernel must win. Stochastic GELU: its mask is the
# kernel's Philox stream of (x, seed), the one eager draws, regenerated in backward from the
# seed (inductor's random numbers would give another mask and keep it for backward).
COMPILED_AS_OPERATORS = ("stochastic_gelu",)


def register() -> None:
    """Register every kernel on its operator's "cuda" key, and keep the operators of
    :data:`COMPILED_AS_OPERATORS` in compiled CUDA graphs. Called once by ``import gelus``;
    imports no Triton."""
    for op, kernel in CUDA_KERNELS.items():
        torch.library.register_kernel(op, "cuda", kernel)
    for member in COMPILED_AS_OPERATORS:
        keep_operator_under_compile(member, "cuda")
