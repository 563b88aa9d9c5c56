"""Every private torch API the project uses, in one place.

Private API is what breaks first on a new torch, so no other file of the project (the library,
the harness and its bench, ``tools/``) names a private torch name, not even in a comment: it
calls these functions, and ``tests/library/test_torch_compat.py`` checks, on the running torch,
that each one still does what it says (and fails on a private torch name anywhere else). Each
function names what it uses and why no public API serves. Three groups: the library's (its
eager route, its operators), the harness's (dynamo's settings and counts, a fused optimizer
kernel) and the tools' (inductor's code generated for a CUDA device that is not there).
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from types import SimpleNamespace

import torch
from torch import Tensor

__all__ = [
    "InductorCaptured",
    "below_autograd",
    "compile_counts",
    "compile_settings",
    "default_kernel_as",
    "dispatch_mode_active",
    "function_apply",
    "functorch_active",
    "fused_adam_",
    "gelu_into",
    "has_device_kernel",
    "has_fused_adam",
    "inductor_captured_code",
    "inductor_fake_cuda",
    "inductor_kernel_build",
    "is_plain",
    "registered_kernel",
    "silu_into",
]


def below_autograd() -> AbstractContextManager:
    """Dispatch below the Autograd key: an autograd Function's forward that calls a custom
    operator with a registered autograd formula would otherwise record that formula too.
    (``torch._C._AutoDispatchBelowAutograd``; ``torch.no_grad`` would also hide the inputs'
    version counters from the Function.)"""
    return torch._C._AutoDispatchBelowAutograd()


def functorch_active() -> bool:
    """Whether a torch.func transform (vmap, grad, jvp, …) is active around this call.
    (``torch._C._are_functorch_transforms_active``: no public query.)"""
    return torch._C._are_functorch_transforms_active()


def dispatch_mode_active() -> bool:
    """Whether a ``TorchDispatchMode`` (fake tensors, functionalization, a tracer) is on the
    stack. (``torch._C._len_torch_dispatch_stack``.)"""
    return bool(torch._C._len_torch_dispatch_stack())


_PLAIN = (Tensor, torch.nn.Parameter)


def is_plain(t: Tensor) -> bool:
    """A dense tensor of its own: not batched, not a subclass (fake, functional, …) that a
    tracer hands in. (``torch._C._functorch``: no public test for a functorch wrapper.)"""
    functorch = torch._C._functorch
    return (
        type(t) in _PLAIN
        and not functorch.is_functorch_wrapped_tensor(t)
        and not functorch.is_legacy_batchedtensor(t)
    )


def function_apply(function: type[torch.autograd.Function], args: Sequence) -> Tensor:
    """``function.apply(*args)`` without ``Function.apply``'s binding of default arguments (an
    ``inspect.signature`` call, ~15 µs), valid when no torch.func transform is active and every
    argument is given. (``torch._functorch.utils.unwrap_dead_wrappers`` is what
    ``Function.apply`` itself does first; the C base class's ``apply`` does the rest.)"""
    args = torch._functorch.utils.unwrap_dead_wrappers(tuple(args))
    return super(torch.autograd.Function, function).apply(*args)


def has_device_kernel(op: Callable, device_type: str) -> bool:
    """Whether a kernel is registered for ``device_type`` on the operator ``op`` (a
    ``torch.library.custom_op``: its ``register_kernel`` table, ``CustomOpDef._backend_fns``) or
    on an ``OpOverload`` (the dispatcher's table, asked through ``torch._C``). torch.library has
    no public query."""
    registered = getattr(op, "_backend_fns", None)
    if registered is not None:
        return device_type in registered
    key = torch._C._dispatch_key_for_device(device_type)
    return torch._C._dispatch_has_kernel_for_dispatch_key(op._name, key)


def registered_kernel(op: Callable, device_type: str) -> Callable | None:
    """What ``torch.library.register_kernel(op, device_type, fn)`` registered on a
    ``torch.library.custom_op``, as the operator's dispatch would call it (``fn`` wrapped by
    torch.library, which honours ``op.set_kernel_enabled``), or None (no such kernel, or not a
    custom_op). Called directly it saves the dispatcher's Python layers, ~20 µs a call.
    (``CustomOpDef._backend_fns``; torch.library has no public query.)"""
    registered = getattr(op, "_backend_fns", None)
    return None if registered is None else registered.get(device_type)


@contextmanager
def default_kernel_as(op: Callable, device_type: str) -> Iterator[None]:
    """Inside the block, the default kernel of the ``torch.library.custom_op`` ``op`` (what its
    dispatch runs on a device with no kernel of its own: CPU, for the library's operators) is
    the kernel registered for ``device_type``; the default again on exit. For
    :func:`gelus._operator.cpu_takes_route_of`. (``CustomOpDef._backend_fns[None]``, which the
    default's dispatch entry reads per call: ``torch.library.register_kernel`` registers a
    kernel for the rest of the process and has no way to take one back.)"""
    table = op._backend_fns
    if device_type not in table:
        raise ValueError(f"{op} has no kernel registered for {device_type!r} to stand in")
    default = table[None]
    table[None] = table[device_type]
    try:
        yield
    finally:
        table[None] = default


def gelu_into(x: Tensor, out: Tensor, approximate: str = "none") -> Tensor:
    """``F.gelu(x)`` written into ``out`` (torch's kernel; ``F.gelu`` has no ``out=``).
    (``torch._C._nn.gelu``.)"""
    return torch._C._nn.gelu(x, approximate=approximate, out=out)


def silu_into(x: Tensor, out: Tensor) -> Tensor:
    """``F.silu(x)`` written into ``out`` (``torch._C._nn.silu``)."""
    return torch._C._nn.silu(x, out=out)


# ---------------------------------------------------------------- the harness's (bench, engines)
# dynamo is imported on first use: importing it costs seconds, and the library never needs it.


def compile_settings(settings: dict[str, object]) -> AbstractContextManager:
    """dynamo's settings (``recompile_limit``, ``fail_on_recompile_limit_hit``, …) set to
    ``settings`` inside the block, as they were after it; an unknown name fails on entry.
    (``torch._dynamo.config.patch``: ``torch.compiler`` has no public setter for these.)"""
    import torch._dynamo

    return torch._dynamo.config.patch(settings)


def compile_counts() -> tuple[int, int]:
    """(graphs dynamo has produced, graph breaks it has recorded) in this process so far: the
    difference across a block says what compiling in it did. (``torch._dynamo.utils.counters``:
    no public count.)"""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def has_fused_adam() -> bool:
    """Whether this torch has the fused Adam kernel :func:`fused_adam_` calls."""
    return hasattr(torch, "_fused_adam_")


def fused_adam_(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    steps: list[Tensor],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """One Adam step in place, every tensor of the lists in one fused kernel (no weight decay,
    no amsgrad): with t = ``steps[i]`` (already counted), m ← β1·m + (1 − β1)·g,
    v ← β2·v + (1 − β2)·g², p ← p − lr·(m / (1 − β1^t)) / (√(v / (1 − β2^t)) + eps).
    (``torch._fused_adam_``, what ``torch.optim.Adam(fused=True)`` calls; the optimizer's
    public API takes parameters, not slices of stacked tensors.)"""
    torch._fused_adam_(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        [],
        steps,
        lr=lr,
        beta1=beta1,
        beta2=beta2,
        weight_decay=0.0,
        eps=eps,
        amsgrad=False,
        maximize=False,
    )


# ---------------------------------------------------------------- inductor's generated code
# For tools/inductor_kernels.py (the compiled CUDA route's instruction gate, no GPU): inductor
# lowers a graph for a CUDA device that is not there, and its generated code is taken before it
# would be loaded. Every name here is inductor's internals; Triton is imported on first use.


_ABSENT = object()


def _fake_cuda_properties(major: int, minor: int) -> SimpleNamespace:
    """What ``torch.cuda.get_device_properties`` answers for the fake device: an H100's figures
    at compute capability ``major.minor`` (inductor reads the SM count, the warp size and the
    shared memory when it picks a kernel's launch)."""
    return SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        major=major,
        minor=minor,
        multi_processor_count=132,
        regs_per_multiprocessor=65536,
        max_threads_per_multi_processor=2048,
        max_threads_per_block=1024,
        warp_size=32,
        total_memory=80 << 30,
        gcnArchName="",
        L2_cache_size=50 << 20,
        shared_memory_per_block_optin=227 << 10,
    )


def _fake_cuda_answers(props: SimpleNamespace) -> tuple[dict, dict]:
    """What the fake device answers: ``torch.cuda``'s functions, and the device interface's
    (inductor's view of the device) that inductor asks while it compiles."""
    major, minor = props.major, props.minor
    cuda = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "get_device_properties": lambda *a, **k: props,
        "get_device_capability": lambda *a, **k: (major, minor),
        "get_rng_state": lambda *a, **k: torch.zeros(16, dtype=torch.uint8),
        "set_rng_state": lambda *a, **k: None,
        "_exchange_device": lambda device: 0,
        "_maybe_exchange_device": lambda device: 0,
    }
    interface = {
        "get_device_properties": lambda *a, **k: props,
        "current_device": lambda: 0,
        "device_count": lambda: 1,
        "exchange_device": lambda device: 0,
        "maybe_exchange_device": lambda device: 0,
        "set_device": lambda device: None,
        "get_raw_stream": lambda device: 0,
        "synchronize": lambda *a: None,
    }
    return cuda, interface


def _fake_cuda_patches(arch: int) -> list[tuple[object, str, object]]:
    """(owner, name, value) of every patch :func:`inductor_fake_cuda` makes."""
    import torch.utils._triton as torch_triton
    from torch._dynamo import device_interface
    from torch._inductor import constant_folding
    from torch._inductor.fx_passes import fuse_attention, misc_patterns, pad_mm
    from torch._inductor.runtime import triton_helpers
    from torch.utils._python_dispatch import TorchDispatchMode
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    major, minor = divmod(arch, 10)
    props = _fake_cuda_properties(major, minor)

    class OnCpu(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if torch.device(kwargs.get("device", "cpu")).type == "cuda":
                kwargs["device"] = torch.device("cpu")
            return func(*args, **kwargs)

    run_node = constant_folding.ConstantFolder.run_node

    def run_node_on_cpu(self, node):
        with OnCpu():
            return run_node(self, node)

    def on_cpu(init):
        return lambda device=None: init(torch.device("cpu"))

    cuda, interface = _fake_cuda_answers(props)
    return [
        *((torch.cuda, name, value) for name, value in cuda.items()),
        *(
            (device_interface.CudaInterface, name, staticmethod(value))
            for name, value in interface.items()
        ),
        (torch_triton, "triton_backend", lambda: make_backend(GPUTarget("cuda", arch, 32))),
        (constant_folding.ConstantFolder, "run_node", run_node_on_cpu),
        (triton_helpers, "set_driver_to_gpu", lambda: None),  # a kernel module's import
        (fuse_attention, "_sfdp_init", on_cpu(fuse_attention._sfdp_init)),
        (pad_mm, "_pad_mm_init", on_cpu(pad_mm._pad_mm_init)),
        (misc_patterns, "_misc_patterns_init", on_cpu(misc_patterns._misc_patterns_init)),
    ]


@contextmanager
def inductor_fake_cuda(arch: int = 90) -> Iterator[None]:
    """inductor's view of a CUDA device of compute capability ``arch`` in a CPU-only torch.

    Patched while the block runs: ``torch.cuda``'s availability, device, capability and
    properties (an H100's), dynamo's CUDA device interface, Triton's backend for the target (no
    driver), the RNG state dynamo saves, and constant folding, which evaluates constant nodes
    (``scalar_tensor`` on cuda) for real: those run on the CPU, where they give the same values.
    The attention and matmul-padding pattern sets (traced once, for the device of the first
    graph) are built for the CPU: they do not match a pointwise graph on any device.
    (``torch._inductor``, ``torch._dynamo.device_interface``, ``torch.utils._triton``: inductor
    asks these, not a public API, what the device is.)"""
    saved = []
    try:
        for owner, name, value in _fake_cuda_patches(arch):
            saved.append((owner, name, vars(owner).get(name, _ABSENT)))
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


class InductorCaptured(Exception):
    """Raised by :func:`inductor_captured_code` in place of loading inductor's generated
    module: the compile that raised it ends there (dynamo wraps it in its own error)."""


@contextmanager
def inductor_captured_code() -> Iterator[list[str]]:
    """Inside the block, each graph inductor compiles (its FX graph cache off, one compile
    thread) stops where its generated Python wrapper would be loaded: the wrapper's source is
    appended to the yielded list and :class:`InductorCaptured` raised. Inputs made inside are
    fake tensors (metadata only). (``torch._inductor.graph.GraphLowering._compile_to_module``,
    ``torch._inductor.config``, ``torch._subclasses.FakeTensorMode``.)"""
    from torch._inductor import config
    from torch._inductor.graph import GraphLowering
    from torch._subclasses.fake_tensor import FakeTensorMode

    captured: list[str] = []

    def capture(self):
        code, _ = self.codegen()
        captured.append(code.value)
        raise InductorCaptured()

    load = GraphLowering._compile_to_module
    GraphLowering._compile_to_module = capture
    try:
        with config.patch(fx_graph_cache=False, compile_threads=1), FakeTensorMode():
            yield captured
    finally:
        GraphLowering._compile_to_module = load


def inductor_kernel_build(name: str, source: str) -> tuple[Callable, dict, dict, object]:
    """(the Triton function, its compile metadata, its compile options, inductor's config) of the
    kernel ``name`` in a module of inductor's generated ``source``: what inductor's launcher
    compiles for its first config (a pointwise kernel of a static size has one). Inside
    :func:`inductor_fake_cuda` for a CUDA kernel. (``torch._inductor.codecache.PyCodeCache``,
    ``CachingAutotuner._create_compile_meta`` / ``_create_compile_options``.)"""
    from torch._inductor.codecache import PyCodeCache

    tuner = getattr(PyCodeCache.load(source), name)
    config = tuner.configs[0]
    meta = tuner._create_compile_meta(config)
    return tuner.fn, meta, tuner._create_compile_options(config, meta), config
