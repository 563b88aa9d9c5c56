"""How a member is an operator: the route each call takes, and the custom-op plumbing they share.

Every member ``m`` defines (in its own module) the custom operators ``torch.ops.gelus.m`` and,
where it has one, ``torch.ops.gelus.m_backward``: schema, a default kernel for every device,
a fake (meta) kernel, a vmap rule and the autograd formula. A call then takes one route:

``eager``
    the member's ``torch.autograd.Function`` (``setup_context``, ``backward``, ``jvp``,
    ``generate_vmap_rule``): torch.func and forward-mode AD work. Its forward calls the forward
    operator, its backward the backward operator, so a kernel registered for a device
    (``torch.library.register_kernel("gelus::gelu", "cuda", fn)``) is what eager calls there.
    When autograd records the backward (``create_graph=True``, or a torch.func transform), the
    backward is a composition of torch ops instead, differentiable to any order.
``compile``
    under ``torch.compile``: a Function of plain torch ops (Dynamo does not trace a Function
    with ``jvp``), fused by inductor with its neighbours (a bias add, casts, the gradient's
    product); only the inputs are saved. Under a torch.func transform inside the compiled
    function the composition itself, without the Function (:func:`apply_compiled`).
``operator``
    under ``torch.compile``, for a member whose operators :data:`OPERATORS_UNDER_COMPILE` keeps
    on x's device: the operators (no graph break: they have fake kernels), opaque to inductor.
    One decision per member and device, for a hand-written kernel that must win over inductor's
    code: on CUDA only stochastic GELU keeps its operator (its Philox mask, drawn in the kernel,
    is the one eager draws from the same seed); every pointwise member compiles to its
    composition there too, since nothing fuses with an opaque call.
``export``
    ``torch.export`` (strict or not) and ``torch.jit.trace``: the operators themselves, so the
    exported program runs the eager kernels and trains through the registered autograd.
``onnx``
    the dynamo ONNX exporter: plain torch ops that it translates faithfully (GELU as the ONNX
    ``Gelu`` op plus the edge fix). The TorchScript-based exporter raises an error naming the
    dynamo exporter.

``torch.fx.symbolic_trace`` sees no route: the public functions are :func:`fx_leaf`, one
``call_function`` node each, which takes its route when the traced graph runs.

docs/ARCHITECTURE.md describes where a device kernel plugs in.
"""

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
from torch import Tensor

from gelus._common import is_tame, result_dtype
from gelus._torch_compat import (
    below_autograd,
    default_kernel_as,
    dispatch_mode_active,
    function_apply,
    functorch_active,
    has_device_kernel,
    is_plain,
    registered_kernel,
)

__all__ = [
    "NAMESPACE",
    "OPERATORS_UNDER_COMPILE",
    "LegacyOnnxExportError",
    "Unary",
    "UnaryFunction",
    "apply_compiled",
    "broadcast_fake",
    "broadcast_vmap",
    "call_kernel",
    "cast",
    "compiled_clamp",
    "cpu_takes_route_of",
    "device_kernel",
    "fast_apply",
    "fx_leaf",
    "keep_operator_under_compile",
    "kernel_device",
    "kernel_for",
    "register_input_only_autograd",
    "register_unary_autograd",
    "route",
    "tame_hint",
    "tangent_sum",
    "unary_backward_vmap",
    "unary_vmap",
]

NAMESPACE = "gelus"

# member (its forward operator's name: "stochastic_gelu" for gelus::stochastic_gelu) -> the
# device types ("cuda", …) whose compiled graphs call that member's operators (with the kernels
# registered for the device) instead of its fusable composition. A member not listed compiles
# to its composition on every device. gelus._cuda lists stochastic GELU for "cuda"
# (docs/CUDA.md); keep_operator_under_compile adds an entry.
OPERATORS_UNDER_COMPILE: dict[str, set[str]] = {}


class LegacyOnnxExportError(RuntimeError):
    """The TorchScript-based ONNX exporter (``dynamo=False``) cannot keep the members' contract."""


_LEGACY_ONNX = (
    "gelus members do not support the TorchScript-based ONNX exporter (dynamo=False): it would "
    "freeze the edge-case branches at the example input. Use the dynamo exporter: "
    "torch.onnx.export(model, args, dynamo=True, opset_version=20)."
)


def keep_operator_under_compile(member: str, device_type: str) -> None:
    """Have compiled graphs on ``device_type`` call the operators of ``member`` (the name of its
    forward operator, e.g. ``"stochastic_gelu"``) instead of its composition of torch ops."""
    if not hasattr(getattr(torch.ops, NAMESPACE), member):
        raise ValueError(
            f"no operator {NAMESPACE}::{member}: name a member by its forward operator "
            f"(e.g. 'stochastic_gelu', 'gelu', 'bias_gelu')"
        )
    OPERATORS_UNDER_COMPILE.setdefault(member, set()).add(device_type)


def route(x: Tensor, member: str | None = None) -> str:
    """``"eager"``, ``"compile"``, ``"operator"`` (compiled, and :data:`OPERATORS_UNDER_COMPILE`
    keeps ``member``'s operators on x's device), ``"export"`` or ``"onnx"``: see the module
    docstring. ``member``: the name of the calling member's forward operator."""
    if not torch.compiler.is_compiling():
        if torch.jit.is_tracing():
            if torch.onnx.is_in_onnx_export():
                raise LegacyOnnxExportError(_LEGACY_ONNX)
            return "export"
        return "eager"
    if torch.compiler.is_exporting():
        return "onnx" if torch.onnx.is_in_onnx_export() else "export"
    if x.device.type in OPERATORS_UNDER_COMPILE.get(member, ()):
        return "operator"
    return "compile"


def fx_leaf(function: Callable) -> Callable:
    """``function``, which records itself as one ``call_function`` node when
    ``torch.fx.symbolic_trace`` (or any ``torch.fx.Tracer``: timm's feature extraction, FX
    quantization's ``prepare_fx``) calls it with a ``torch.fx.Proxy`` among its arguments.

    Tracing through a member would meet Python control flow on the proxy (argument checks, the
    route) and fail; the node instead calls the public function itself when the graph runs, so
    the graph takes the route of its run (eager operators, compiled, exported), keeps the
    members' edge cases, and traces again when a graph module is traced anew (prepare_fx traces
    what create_feature_extractor gave). ``torch.fx.wrap`` would patch only the defining
    module's globals, missing ``from gelus.functional import gelu``; this check is public API
    and costs one ``isinstance`` per argument."""

    @functools.wraps(function)
    def traced_as_one_call(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.fx.Proxy):
                return value.tracer.create_proxy("call_function", traced_as_one_call, args, kwargs)
        return function(*args, **kwargs)

    return traced_as_one_call


def apply_compiled(function: type[torch.autograd.Function], composition: Callable, *args):
    """The compile route of a member: ``function.apply(*args)``, a Function of plain torch ops
    that saves only its inputs, or, under a torch.func transform, ``composition(*args)`` (the
    Function's forward, without it), which the transform differentiates itself.

    Dynamo turns a traced Function into ``autograd_function_apply``, whose Function has no vmap
    rule (torch 2.13, also with ``generate_vmap_rule``): ``torch.compile(vmap(grad(f)))`` raised
    ``InternalTorchDynamoError`` ("You tried to vmap over ApplyTemplate"). ``F.gelu`` compiles
    there, being aten ops; so does the composition."""
    if functorch_active():
        return composition(*args)
    return function.apply(*args)


def compiled_clamp(x: Tensor, bound: Tensor | float) -> Tensor:
    """x clamped to ±bound in a composition of the compile route. Under a torch.func transform,
    which differentiates the composition itself (:func:`apply_compiled`), nan bypasses the
    clamp, whose derivative is 0 there: the slope at nan stays nan, as on the eager route."""
    t = x.clamp(-bound, bound)
    return torch.where(x.isnan(), x, t) if functorch_active() else t


def broadcast_fake(*tensors: Tensor) -> Tensor:
    """The fake kernel of a broadcasting pointwise operator: its result's shape, dtype, device."""
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    return tensors[0].new_empty(shape, dtype=result_dtype(*tensors))


def _align(in_dims: Sequence[int | None], tensors: Sequence[Tensor]) -> list[Tensor]:
    """Batched tensors with the batch dim first and their logical dims right-aligned."""
    logical = [t.dim() - (d is not None) for t, d in zip(tensors, in_dims, strict=True)]
    ndim = max(logical)
    aligned = []
    for t, d, k in zip(tensors, in_dims, logical, strict=True):
        if d is not None:
            t = t.movedim(d, 0)
            t = t.reshape((t.shape[0],) + (1,) * (ndim - k) + tuple(t.shape[1:]))
        aligned.append(t)  # an unbatched tensor broadcasts from the right
    return aligned


def broadcast_vmap(op: Callable[..., Tensor], tensor_count: int) -> Callable:
    """The vmap rule of a broadcasting pointwise operator whose first ``tensor_count`` arguments
    are tensors (the rest options): batch dims moved to the front, result batched on dim 0."""

    def rule(info, in_dims, *args):
        dims = in_dims[:tensor_count]
        if all(d is None for d in dims):
            return op(*args), None
        # A batched tensor has one more dim than any unbatched one: the result's dim 0 is B.
        return op(*_align(dims, args[:tensor_count]), *args[tensor_count:]), 0

    return rule


def cast(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t.to(dtype)`` for a result that autograd or a torch.func transform may differentiate.

    Under a torch.func transform a composition of a 0-dim float32 tensor with a Python float
    (``t * 0.5``) carries a float64 tangent (torch 2.13), and a ``.to`` that is a no-op on the
    value leaves that tangent uncast: ``jvp`` of ``vjp`` returned float64 for a float32 input.
    A copy casts the tangent too; outside torch.func no copy is made.
    """
    if functorch_active():
        return t.to(dtype, copy=True)
    return t.to(dtype)


def tangent_sum(terms: Sequence[Tensor | None]) -> Tensor | None:
    """The sum of the tangent terms that are present (None: that input has no tangent)."""
    total = None
    for term in terms:
        if term is not None:
            total = term if total is None else total + term
    return total


def fast_apply(function: type[torch.autograd.Function], *args):
    """``function.apply(*args)``, without binding default arguments when no torch.func transform
    is active: ``Function.apply`` binds them with ``inspect.signature`` on every call, ~15 µs
    that a pointwise op on a small tensor notices. Every argument must be given."""
    if functorch_active():
        return function.apply(*args)
    return function_apply(function, args)


# ---------------------------------------------------------------- another device's route on CPU
# "cpu" -> the device type whose route CPU tensors take, inside cpu_takes_route_of() alone: the
# bench's host time of the CUDA route without a GPU, and the Triton kernels' checks on CPU
# (gelus.bench.device_timing.cuda_route_on_cpu). Empty otherwise; changed by nothing else.
_ROUTED: dict[str, str] = {}


def kernel_device(x: Tensor) -> str:
    """The device type whose registered kernels a call on x takes: x's own, or inside
    :func:`cpu_takes_route_of` the device a CPU tensor stands in for."""
    device = x.device.type
    return _ROUTED.get(device, device) if _ROUTED else device


@contextlib.contextmanager
def cpu_takes_route_of(device_type: str, ops: Iterable[Callable]) -> Iterator[None]:
    """Inside the block, calls on CPU tensors take the route ``device_type`` tensors take: every
    choice of this module (:func:`kernel_for`, :func:`device_kernel`, no :func:`tame_hint`) and
    ``gelus._triton.available`` answers for ``device_type``, and each operator of ``ops`` (those
    with a kernel for ``device_type``) runs that kernel when dispatched on a CPU tensor. The
    Python, the dispatcher and the host functions run as on the device; the kernels then need
    CPU tensors (Triton's interpreter) or stubbed launches (``gelus._triton.launches_stubbed``).
    Undone on exit; one route at a time."""
    if _ROUTED:
        raise RuntimeError(f"CPU already takes the {_ROUTED['cpu']} route: leave that block first")
    with contextlib.ExitStack() as defaults:
        for op in ops:
            defaults.enter_context(default_kernel_as(op, device_type))
        _ROUTED["cpu"] = device_type
        try:
            yield
        finally:
            _ROUTED.clear()


def kernel_for(
    op: Callable, default: Callable, x: Tensor, *others: Tensor, direct: bool = False
) -> Callable:
    """What the eager route calls for ``op`` on x's device: the operator itself when a kernel
    is registered for that device (``torch.library.register_kernel``), or under vmap (a torch.func
    transform, or the batched gradients of ``autograd.grad(is_grads_batched=True)``), whose rules
    live on the operator; otherwise its default kernel, called directly, which saves the
    dispatcher's Python layers (~20 µs a call) and the lazy import of dynamo that a custom
    operator's first call triggers (~2 s). Tracers (fake or functional tensors, a dispatch
    mode) get the operator too. ``others``: the call's other tensor arguments. ``direct``: the
    registered device kernel itself rather than the operator, for the same saving (callers
    that pass the operator's arguments only, no ``tame`` hint)."""
    if functorch_active() or dispatch_mode_active() or not all(map(is_plain, (x, *others))):
        return op
    device = kernel_device(x)
    if not has_device_kernel(op, device):
        return default
    return (registered_kernel(op, device) or op) if direct else op


def device_kernel(op: Callable, x: Tensor, *others: Tensor) -> Callable | None:
    """The kernel registered for x's device on ``op`` (called directly, as :func:`kernel_for`
    with ``direct``; ``op`` itself where it cannot be had directly) when this is a plain eager
    call (real tensors, no torch.func transform, no tracer), else None. For the operators that
    only a device's kernels need (one-pass parameter gradients, the stochastic mask drawn in the
    kernel): the default route composes torch ops instead, which autograd and tracers can
    follow."""
    device = kernel_device(x)
    if torch.compiler.is_compiling() or not has_device_kernel(op, device):
        return None  # has_device_kernel: a dict lookup, the common CPU case stops here
    if functorch_active() or dispatch_mode_active() or not all(map(is_plain, (x, *others))):
        return None
    return registered_kernel(op, device) or op


def call_kernel(kernel: Callable, op: Callable, args: Sequence, tame: bool | None):
    """Call what :func:`kernel_for` chose: the operator, whose schema carries no hint, or its
    default kernel with the ``tame`` hint as the last argument."""
    return kernel(*args) if kernel is op else kernel(*args, tame)


def tame_hint(x: Tensor, bound: float | None) -> bool | None:
    """Whether every element of x is finite with |x| <= bound, for the default kernels' fast
    path: checked once in the eager forward and passed to both default kernels (not to the
    operators: a kernel registered for a device checks what it needs). None (the kernel decides)
    off CPU, where the check would synchronize, while CPU takes another device's route
    (:func:`cpu_takes_route_of`), and under torch.func."""
    if (
        bound is None
        or x.dtype not in (torch.float32, torch.float64)  # half types: checked after upcasting
        or x.device.type != "cpu"
        or _ROUTED
        or functorch_active()
    ):
        return None
    return is_tame(x, bound)


class Unary:
    """A unary member as its eager Function sees it: the two operators and the composed slope.

    ``forward(x, *options)`` and ``backward(grad, x, *options)`` are the operators
    (``torch.ops.gelus.m`` and ``torch.ops.gelus.m_backward``), ``forward_kernel`` and
    ``backward_kernel`` their default kernels (which take the ``tame`` hint last); ``slope(x, *options)`` the derivative as a
    differentiable composition, in x's compute dtype; ``bound(*options)`` the bound of
    :func:`tame_hint` (None: the kernels need no check).
    """

    def __init__(
        self,
        forward: Callable,
        backward: Callable,
        slope: Callable,
        bound: Callable,
        forward_kernel: Callable,
        backward_kernel: Callable,
    ) -> None:
        self.forward = forward
        self.backward = backward
        self.slope = slope
        self.bound = bound
        self.forward_kernel = forward_kernel  # the operators' default kernels (kernel_for)
        self.backward_kernel = backward_kernel

    def __call__(self, x: Tensor, *options) -> Tensor:
        """The eager route: :class:`UnaryFunction`."""
        tame = tame_hint(x, self.bound(*options))
        return fast_apply(UnaryFunction, x, self, tame, *options)


class UnaryFunction(torch.autograd.Function):
    """The eager route of a unary member: operators forward and backward, composed slope for
    forward-mode AD and for a backward that autograd records; vmap rule generated (it runs these
    under vmap, where the operators' vmap rules apply)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, member: Unary, tame: bool | None, *options) -> Tensor:
        forward = kernel_for(member.forward, member.forward_kernel, x)
        with below_autograd():  # this Function is the autograd
            return call_kernel(forward, member.forward, (x, *options), tame)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, member, tame, *options = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        ctx.member = member
        ctx.tame = tame
        ctx.options = options

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True or torch.func: stay differentiable
            grad_x = cast(grad * ctx.member.slope(x, *ctx.options), x.dtype)
        else:
            op = ctx.member.backward
            backward = kernel_for(op, ctx.member.backward_kernel, x, grad)
            with below_autograd():
                grad_x = call_kernel(backward, op, (grad, x, *ctx.options), ctx.tame)
        return (grad_x, None, None) + (None,) * len(ctx.options)

    @staticmethod
    def jvp(ctx, x_t: Tensor, *_) -> Tensor:
        (x,) = ctx.saved_tensors
        return cast(x_t * ctx.member.slope(x, *ctx.options), x.dtype)


def register_input_only_autograd(
    op, grad_of_input: Callable[..., Tensor]
) -> tuple[Callable, Callable]:
    """Autograd for ``op(x, *options)`` that saves only x (memory-lean): the backward is
    ``grad_of_input(grad, x, *options)``, the options get no gradient. Returns (setup_context,
    backward), for the eager ``autograd.Function`` of the same member to reuse."""

    def setup_context(ctx, inputs, output):
        x, *options = inputs
        ctx.save_for_backward(x)
        ctx.options = options

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (grad_of_input(grad, x, *ctx.options),) + (None,) * len(ctx.options)

    op.register_autograd(backward, setup_context=setup_context)
    return setup_context, backward


def register_unary_autograd(forward_op, member: Unary) -> None:
    """The autograd formula of a unary forward operator ``op(x, *options)``, for the export
    route (and direct calls of ``torch.ops.gelus.m``): the same backward as
    :class:`UnaryFunction`."""

    def grad_of_input(grad: Tensor, x: Tensor, *options) -> Tensor:
        if torch.is_grad_enabled():  # double backward: the slope as a differentiable product
            return cast(grad * member.slope(x, *options), x.dtype)
        return member.backward(grad, x, *options)

    register_input_only_autograd(forward_op, grad_of_input)


def unary_vmap(op: Callable) -> Callable:
    """The vmap rule of a unary pointwise operator ``op(x, *options)``: it is elementwise, so it
    runs on the batched tensor as is."""

    def rule(info, in_dims, x, *options):
        return op(x, *options), in_dims[0]

    return rule


def unary_backward_vmap(op: Callable) -> Callable:
    """The vmap rule of ``op(grad, x, *options)``: batch dims moved to the front."""
    return broadcast_vmap(op, 2)
