"""The members' CUDA kernels: the Triton kernels of :mod:`gelus._triton`, registered as the "cuda"
implementation of the operators.

Eager CUDA tensors take them with no ``torch.compile``; compiled graphs keep the operators on CUDA
(``"cuda"`` joins :data:`gelus._operator.OPERATOR_DEVICES_UNDER_COMPILE`; the operators have fake
kernels, so there is no graph break), so the accuracy of the kernels (exact GELU ≤ 1 ulp, also in
the negative tail; docs/CUDA.md) holds eager and compiled. Registering imports no Triton: the
kernels load the first time a CUDA tensor meets a member.

On CUDA these operators run Triton kernels:
  gelu / gelu_backward (every form; ``accurate=True`` is the same kernel, accurate by default),
  swish / swish_backward (float β), swish_tensor (forward), generalized_gelu (forward),
  bias_gelu / bias_gelu_backward, geglu / geglu_backward.
A call the kernels do not take (an integer dtype, parameters that are neither scalars nor per
channel, mixed dtypes that promote) runs the operator's default kernel, as on any device. The backward
of tensor-β Swish and of generalized GELU (torch compositions, for their reductions over the
parameters' broadcast dimensions) takes the one-pass Triton gradients on CUDA when autograd does
not record it, and training-mode stochastic GELU draws its mask in the kernel (Philox, seed from
torch's generator) and regenerates it in backward, keeping only x and the seed.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from gelus import _bias_gelu, _geglu, _gelu, _generalized, _stochastic, _swish, _triton
from gelus._operator import OPERATOR_DEVICES_UNDER_COMPILE, _plain

# A fallback runs the operator's default kernel: the decorated function, which CustomOpDef keeps as
# ``_init_fn`` (torch 2.4 and later).

__all__ = [
    "CUDA_KERNELS",
    "generalized_gelu_gradients",
    "register",
    "stochastic_gelu",
    "swish_tensor_gradients",
]


def _kernels(x: Tensor, *parameters: Tensor):
    """The Triton host functions for this call, or None to run the default kernel."""
    if not _triton.available(x):
        return None
    tensors = [p for p in parameters if isinstance(p, Tensor)]
    # Real tensors only: a backward hook also runs while torch.compile or torch.export traces the
    # operators' autograd with fake tensors, which no Triton kernel can take.
    if torch._C._len_torch_dispatch_stack() or not all(map(_plain, (x, *tensors))):
        return None
    if any(p.dtype != x.dtype or p.device != x.device for p in tensors):
        return None  # promotion or a parameter elsewhere: the default kernel's rules
    if tensors and torch.broadcast_shapes(x.shape, *(p.shape for p in tensors)) != x.shape:
        return None
    ops = _triton.load()
    if tensors and not ops.supports_parameters(x, *tensors):
        return None
    return ops


def gelu(x, approximate="none", accurate=False, tame=None):
    ops = _kernels(x)
    if ops is None:
        return _gelu.kernel_forward(x, approximate, accurate, tame)
    return ops.gelu_forward(x, approximate)


def gelu_backward(grad, x, approximate="none", accurate=False, tame=None):
    ops = _kernels(x)
    if ops is None or grad.dtype != x.dtype:
        return _gelu.kernel_backward(grad, x, approximate, accurate, tame)
    return ops.gelu_backward(grad, x, approximate)


def swish(x, beta=1.0, tame=None):
    ops = _kernels(x)
    if ops is None:
        return _swish.forward(x, beta, tame=tame)
    return ops.swish_forward(x, beta)


def swish_backward(grad, x, beta=1.0, tame=None):
    ops = _kernels(x)
    if ops is None or grad.dtype != x.dtype:
        return _swish.backward(grad, x, beta, tame=tame)
    return ops.swish_backward(grad, x, beta)[0]


def swish_tensor(x, beta):
    ops = _kernels(x, beta)
    if ops is None:
        return _swish.swish_tensor_op._init_fn(x, beta)
    return ops.swish_forward(x, beta)


def generalized_gelu(x, mu, sigma):
    ops = _kernels(x, mu, sigma)
    if ops is None:
        return _generalized.forward(x, mu, sigma)
    return ops.generalized_gelu_forward(x, mu, sigma)


def bias_gelu(x, bias, approximate="none", accurate=False):
    ops = _kernels(x, bias)
    if ops is None:
        return _bias_gelu.bias_gelu_op._init_fn(x, bias, approximate, accurate)
    return ops.bias_gelu_forward(x, bias, approximate)


def bias_gelu_backward(grad, x, bias, approximate="none", accurate=False):
    ops = _kernels(x, bias)
    if ops is None or grad.dtype != x.dtype:
        return _bias_gelu.bias_gelu_backward_op._init_fn(grad, x, bias, approximate, accurate)
    return ops.bias_gelu_backward(grad, x, bias, approximate)[0]


def geglu(x, dim=-1, approximate="none", accurate=False, tame=None):
    ops = _kernels(x)
    if ops is None:
        return _geglu.geglu_op._init_fn(x, dim, approximate, accurate, tame)
    return ops.geglu_forward(x, dim, approximate)


def geglu_backward(grad, x, dim=-1, approximate="none", accurate=False, tame=None):
    ops = _kernels(x)
    if ops is None or grad.dtype != x.dtype:
        return _geglu.geglu_backward_op._init_fn(grad, x, dim, approximate, accurate, tame)
    return ops.geglu_backward(grad, x, dim, approximate)


# ---------------------------------------------------------------- parameter gradients
# The members whose backward is a composition of torch ops (it reduces over the parameters'
# broadcast dimensions) call these first in a backward that autograd does not record: one kernel
# pass gives dx and the per-channel partial sums of dμ, dσ (or dβ). None: not this call.


def generalized_gelu_gradients(grad, x, mu, sigma):
    """(dx, dμ, dσ) from the Triton kernels, or None (CPU, promotion, create_graph, …)."""
    ops = _kernels(x, mu, sigma)
    if ops is None or grad.dtype != x.dtype or grad.shape != x.shape or torch.is_grad_enabled():
        return None
    return ops.generalized_gelu_backward(grad, x, mu, sigma)


def swish_tensor_gradients(grad, x, beta):
    """(dx, dβ) from the Triton kernels for a tensor β, or None."""
    ops = _kernels(x, beta)
    if ops is None or grad.dtype != x.dtype or grad.shape != x.shape or torch.is_grad_enabled():
        return None
    return ops.swish_backward(grad, x, beta)


# ---------------------------------------------------------------- stochastic GELU


class _StochasticBackward(torch.autograd.Function):
    """grad·m, the mask regenerated from (x, seed): linear in grad, so its own backward is the
    same kernel (double backward stays exact)."""

    @staticmethod
    def forward(ctx, grad: Tensor, x: Tensor, seed: int) -> Tensor:
        ctx.save_for_backward(x)
        ctx.seed = seed
        return _triton.load().stochastic_gelu_backward(grad, x, seed, 0)

    @staticmethod
    def backward(ctx, grad_grad: Tensor):
        (x,) = ctx.saved_tensors
        return _StochasticBackward.apply(grad_grad, x, ctx.seed), None, None


class _Stochastic(torch.autograd.Function):
    """x·m, m ~ Bernoulli(Φ(x)) drawn in the kernel from Philox(seed); saves x and the seed only."""

    @staticmethod
    def forward(ctx, x: Tensor, seed: int) -> Tensor:
        ctx.save_for_backward(x)
        ctx.seed = seed
        return _triton.load().stochastic_gelu_forward(x, seed, 0)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return _StochasticBackward.apply(grad.to(x.dtype), x, ctx.seed), None


def stochastic_gelu(x: Tensor, generator: torch.Generator | None) -> Tensor | None:
    """Training-mode stochastic GELU on the Triton kernels, or None for the torch route.

    The Philox seed is drawn from ``generator`` (torch's default CPU generator when None, so a
    run is reproducible under ``torch.manual_seed``, as dropout is) without touching the GPU.
    """
    if _kernels(x) is None or torch._C._are_functorch_transforms_active():
        return None
    if generator is not None and generator.device.type != "cpu":
        return None  # drawing the seed on the GPU would wait for it
    seed = int(torch.randint(2**31, (1,), generator=generator))
    return _Stochastic.apply(x, seed)


# operator -> its CUDA kernel
CUDA_KERNELS: dict[object, Callable] = {
    _gelu.gelu_op: gelu,
    _gelu.gelu_backward_op: gelu_backward,
    _swish.swish_op: swish,
    _swish.swish_backward_op: swish_backward,
    _swish.swish_tensor_op: swish_tensor,
    _generalized.generalized_gelu_op: generalized_gelu,
    _bias_gelu.bias_gelu_op: bias_gelu,
    _bias_gelu.bias_gelu_backward_op: bias_gelu_backward,
    _geglu.geglu_op: geglu,
    _geglu.geglu_backward_op: geglu_backward,
}


def register() -> None:
    """Register every kernel on its operator's "cuda" key, and keep the operators in compiled
    CUDA graphs. Called once by ``import gelus``; imports no Triton."""
    for op, kernel in CUDA_KERNELS.items():
        op.register_kernel("cuda")(kernel)
    OPERATOR_DEVICES_UNDER_COMPILE.add("cuda")
    _generalized.fused_gradients = generalized_gelu_gradients
    _swish.fused_tensor_gradients = swish_tensor_gradients
    _stochastic.device_kernel = stochastic_gelu
