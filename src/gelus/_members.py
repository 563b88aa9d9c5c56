"""The one table of members: what every part of the project that lists members reads.

One :class:`Member` per canonical name of the family (and per name from Hugging Face and timm
the library computes itself): its function (``gelus.functional``), its module class
(``gelus.modules``), its operators (``torch.ops.gelus.*``) and their CUDA kernels, the launches
of the Triton kernels that the instruction gate compiles (``tools/compile_kernels.py``), the
bench's rows (``gelus bench kernels``), the name of its float64 oracle (tests/oracles.py: the
oracles stay the tests', independent of this code) and its accuracy bound's name
(docs/NUMERICS.md; ``tools/gpu_check.py``: ``fp32_allowed``). The registry
(:data:`gelus.registry.ACTIVATIONS`), :data:`gelus._cuda.CUDA_KERNELS`, ``gelus.patch``'s gate
methods, the harness's gated activations, the instruction gate, the device check, the bench and
the tests' member list derive from it; tests/library/test_members.py checks that it is complete
(every public function, module, registry name, operator and CUDA kernel is in it, and nothing
else is).

Light to import: code is named by dotted strings (``"module:attribute"``) and imported when
asked for (:func:`resolve`); nothing here imports Triton or a member's module.

Adding a member (docs/LIBRARY.md, "Adding a member"): its own file ``gelus/_<name>.py`` (the
operators ``<op>_op``, their kernels, the routes; a Triton kernel in its own file
``gelus/_triton/_<name>.py`` where it has one), its function in ``functional.py``, its class in
``modules.py``, the class in ``__init__.py``, and its :class:`Member` in :data:`MEMBERS` here.
"""

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "GPT_OSS",
    "MEMBERS",
    "Bench",
    "Check",
    "Launch",
    "Member",
    "OwnKernel",
    "PatchedMethod",
    "by_name",
    "cuda_kernels",
    "operator",
    "resolve",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
DTYPES = ("fp16", "bf16", "fp32", "fp64")


@dataclass(frozen=True)
class Launch:
    """Variants of a shared Triton kernel (``gelus._triton._kernels``) that a member's host
    functions launch, as the instruction gate compiles them: ``<kernel> <dtype> <name> fwd|bwd``.

    member: the MEMBER constexpr, a constant's name in ``_kernels`` or an int (a GELU form);
    sums: the parameter kernels' partial sums per program in backward (the last the usual one;
    others add `` sums=N`` to the label); fp64_sums: float64's, where they differ."""

    kernel: str  # "pointwise", "geglu", "rows" or "columns"
    name: str
    member: str | int = 0
    form: int = 0
    sums: tuple[int, ...] = (0,)
    fp64_sums: tuple[int, ...] | None = None
    dtypes: tuple[str, ...] = DTYPES


@dataclass(frozen=True)
class OwnKernel:
    """A Triton kernel in a file of its own: ``<path>.<member name>_kernel``, whose
    ``gate_variants()`` yields ``(label, dtype, config)`` of every launch its host functions make
    on a long tensor. traffic: the elements each pass moves per output element (forward,
    backward); arguments: its runtime arguments and their types ("x": the input's, "acc": the
    compute type, or a Triton type)."""

    path: str
    traffic: tuple[int, int]
    arguments: Mapping[str, str]


@dataclass(frozen=True)
class Bench:
    """One row of ``gelus bench kernels``: the function called with ``kwargs``, its learnable
    inputs by name, whether its input's last dim is twice the output's, and the torch row its
    ratios are taken against."""

    key: str
    label: str
    kwargs: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    params: tuple[str, ...] = ()
    doubled_input: bool = False
    reference: str = "torch-gelu"


@dataclass(frozen=True)
class Check:
    """One variant of the device check (``tools/gpu_check.py``) for a member it has no
    hand-written variants for: ``<name>-<suffix>``, the function called with ``kwargs``, against
    the member's oracle called with the same."""

    suffix: str
    kwargs: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class PatchedMethod:
    """A gate that another library computes in a method of a class that is not an activation:
    ``gelus.patch`` puts the member (built from the instance's ``arguments``) on the instance
    in the method's place."""

    module: str
    cls: str
    method: str
    arguments: tuple[str, ...] = ()


@dataclass(frozen=True)
class Member:
    """One member: its name (the registry's, and its function's in ``gelus.functional`` unless
    ``functional`` says otherwise), where its code is and what derives from it.

    code: the module holding its operators, each ``<op>`` as ``<op>_op``; cuda: operator -> its
    CUDA kernel ("module:function"); oracle: the name of its float64 oracle in tests/oracles.py
    (None: no oracle of its own, e.g. a form of another member's); bound: its accuracy bound's
    name (docs/NUMERICS.md; None: measured, not bounded)."""

    name: str
    module: str
    functional: str | None = ""  # "": the same as name; None: a module only
    more_modules: tuple[str, ...] = ()
    code: str = ""
    operators: tuple[str, ...] = ()
    cuda: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    launches: tuple[Launch, ...] = ()
    kernel: OwnKernel | None = None
    bench: tuple[Bench, ...] = ()
    checks: tuple[Check, ...] = ()
    oracle: str | None = None
    bound: str | None = None
    gated: bool = False  # a·f(b) of the halves of x: the input is twice the output
    patched_methods: tuple[PatchedMethod, ...] = ()
    modules: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "modules", (self.module, *self.more_modules))
        if self.functional == "":
            object.__setattr__(self, "functional", self.name)


def _in_cuda(*operators: str) -> Mapping[str, str]:
    """Operators whose CUDA kernel is the function of the same name in gelus._cuda."""
    return MappingProxyType({op: f"gelus._cuda:{op}" for op in operators})


def _forms(kernel: str, member_is_form: bool) -> tuple[Launch, ...]:
    forms = ("exact", "tanh", "sigmoid")
    if member_is_form:  # the pointwise kernel: MEMBER is the form
        return tuple(Launch(kernel, name, form) for form, name in enumerate(forms))
    return tuple(Launch(kernel, name, 0, form) for form, name in enumerate(forms))


def _per_channel(name: str, member: str, form: int = 0, **kwargs: Any) -> tuple[Launch, ...]:
    return tuple(Launch(k, name, member, form, **kwargs) for k in ("rows", "columns"))


GPT_OSS = "transformers.models.gpt_oss.modeling_gpt_oss"

MEMBERS: tuple[Member, ...] = (
    # the GELU family
    Member(
        "gelu",
        "GELU",
        more_modules=("QuickGELU",),
        code="gelus._gelu",
        operators=("gelu", "gelu_backward"),
        cuda=_in_cuda("gelu", "gelu_backward"),
        launches=_forms("pointwise", member_is_form=True),
        bench=(
            Bench("exact", "gelu"),
            Bench("exact-accurate", "gelu (accurate)", MappingProxyType({"accurate": True})),
            Bench(
                "tanh",
                "gelu(tanh)",
                MappingProxyType({"approximate": "tanh"}),
                reference="torch-gelu-tanh",
            ),
            Bench("sigmoid", "gelu(sigmoid)", MappingProxyType({"approximate": "sigmoid"})),
        ),
        oracle="exact",
        bound="none",
    ),
    Member(
        "silu",
        "SiLU",
        code="gelus._swish",  # Swish's operators at β = 1
        bench=(Bench("silu", "silu"),),
        oracle="silu",
        bound="swish",
    ),
    Member(
        "swish",
        "Swish",
        code="gelus._swish",
        operators=("swish", "swish_backward", "swish_tensor", "swish_tensor_backward"),
        cuda=_in_cuda("swish", "swish_backward", "swish_tensor", "swish_tensor_backward"),
        # a float β: the flat kernel (float64: the rows kernel, β not an fp32 argument)
        launches=(
            Launch("pointwise", "swish", "SWISH", dtypes=DTYPES[:3]),
            *_per_channel("swish_beta", "SWISH_BETA", sums=(1,), fp64_sums=(0, 1)),
        ),
        bench=(Bench("swish", "swish(β=1.5)", MappingProxyType({"beta": 1.5})),),
        oracle="silu",
        bound="swish",
    ),
    Member("clipped_gelu", "ClippedGELU", functional=None),  # gelu's operators, clamped
    Member(
        "generalized_gelu",
        "GeneralizedGELU",
        code="gelus._generalized",
        operators=("generalized_gelu", "generalized_gelu_backward"),
        cuda=_in_cuda("generalized_gelu", "generalized_gelu_backward"),
        launches=_per_channel("generalized", "GENERALIZED", sums=(1, 2)),
        bench=(Bench("generalized", "generalized_gelu", params=("mu", "sigma")),),
        oracle="exact",  # at μ = 0, σ = 1
        bound="generalized",
    ),
    Member(
        "stochastic_gelu",
        "StochasticGELU",
        code="gelus._stochastic",
        operators=("stochastic_gelu", "stochastic_gelu_backward"),
        cuda=_in_cuda("stochastic_gelu", "stochastic_gelu_backward"),
        launches=(Launch("pointwise", "stochastic", "STOCHASTIC"),),
        bench=(Bench("stochastic", "stochastic_gelu", MappingProxyType({"training": True})),),
        oracle="exact",  # in evaluation: its expectation
        bound="none",
    ),
    Member(
        "bias_gelu",
        "BiasGELU",
        code="gelus._bias_gelu",
        operators=("bias_gelu", "bias_gelu_backward", "bias_gelu_grads"),
        cuda=_in_cuda("bias_gelu", "bias_gelu_backward", "bias_gelu_grads"),
        launches=tuple(
            launch
            for form, name in enumerate(("exact", "tanh", "sigmoid"))
            for launch in _per_channel(f"bias_{name}", "BIAS", form, sums=(0, 1))
        ),
        bench=(Bench("bias-gelu", "bias_gelu", params=("bias",)),),
        oracle="exact",  # at bias 0
        bound="none",
    ),
    Member(
        "geglu",
        "GEGLU",
        code="gelus._geglu",
        operators=("geglu", "geglu_backward"),
        cuda=_in_cuda("geglu", "geglu_backward"),
        launches=_forms("geglu", member_is_form=False),
        bench=(Bench("geglu", "geglu", doubled_input=True),),
        oracle="geglu",
        bound="none",
        gated=True,
    ),
    Member(
        "swiglu",
        "SwiGLU",
        code="gelus._glu",
        operators=("swiglu", "swiglu_backward"),
        oracle="swiglu",
        bound="swish",
        gated=True,
    ),
    Member(
        "reglu",
        "ReGLU",
        code="gelus._glu",
        operators=("reglu", "reglu_backward"),
        oracle="reglu",
        bound="exact-product",
        gated=True,
    ),
    Member(  # GPT-OSS's expert gate
        "clamped_swiglu",
        "ClampedSwiGLU",
        code="gelus._clamped_swiglu",
        operators=("clamped_swiglu", "clamped_swiglu_backward"),
        cuda=MappingProxyType(
            {
                "clamped_swiglu": "gelus._clamped_swiglu:cuda_forward",
                "clamped_swiglu_backward": "gelus._clamped_swiglu:cuda_backward",
            }
        ),
        kernel=OwnKernel(
            "gelus._triton._clamped_swiglu",
            traffic=(3, 5),  # as GEGLU's: read gate and up, write y; + grad, write both
            arguments=MappingProxyType(
                {
                    "x_ptr": "x",
                    "grad_ptr": "x",
                    "out_ptr": "x",
                    "outer": "i32",
                    "inner": "i32",
                    "alpha": "fp32",
                    "limit": "fp32",
                }
            ),
        ),
        bench=(Bench("clamped-swiglu", "clamped_swiglu", doubled_input=True),),
        checks=(
            Check("interleaved", MappingProxyType({"interleaved": True})),
            Check("halves", MappingProxyType({"interleaved": False})),
        ),
        oracle="clamped_swiglu",
        gated=True,
        patched_methods=(
            PatchedMethod(GPT_OSS, "GptOssExperts", "_apply_gate", ("alpha", "limit")),
        ),
    ),
    # names from Hugging Face and timm, each its own math (gelus._extra); no stated bound
    Member("laplace", "Laplace", code="gelus._extra", oracle="laplace"),
    Member("relu2", "ReLU2", code="gelus._extra", oracle="relu2"),
    Member("sqrtsoftplus", "SqrtSoftplus", code="gelus._extra", oracle="sqrtsoftplus"),
    Member("xielu", "XIELU", code="gelus._extra", oracle="xielu"),
    Member("hard_mish", "HardMish", code="gelus._extra", oracle="hard_mish"),
)


def by_name() -> dict[str, Member]:
    """name -> member, in table order."""
    return {m.name: m for m in MEMBERS}


def resolve(path: str) -> Any:
    """The object a ``"module:attribute"`` string names (importing the module)."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def operator(member: Member, op: str) -> Callable:
    """The custom operator ``gelus::<op>`` of ``member``: ``<op>_op`` of its code module."""
    return getattr(importlib.import_module(member.code), f"{op}_op")


def cuda_kernels() -> dict[Callable, Callable]:
    """operator -> its CUDA kernel, every member's (imports the members' modules, no Triton)."""
    return {operator(m, op): resolve(kernel) for m in MEMBERS for op, kernel in m.cuda.items()}
