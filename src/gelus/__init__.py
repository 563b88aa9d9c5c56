"""gelus: the GELU family for PyTorch, and a reproduction harness for the GELU paper.

``import gelus`` loads the activation library only (torch, no plotting or data code), and
registers its operators (``torch.ops.gelus.*``).

    gelus.functional      pure functions: gelu, silu, swish, generalized_gelu, stochastic_gelu, …
    gelus.GELU, …         one nn.Module per function
    gelus.get_activation  name (or alias such as Hugging Face's "gelu_new") -> fresh module
    gelus.init            calculate_gain and init_layer_ for every registered activation
    gelus.patch           put gelus's members into a built model (torch, Hugging Face, timm)
    gelus.audit           which GELU form each activation site computes, and what a swap changes
    gelus.integrations    Hugging Face's hidden_act and timm's act_layer names ("gelus:…")
"""

__version__ = "0.1.0"  # first: `gelus --version` reads it where torch does not import

try:  # torch, the library's one dependency: missing or broken, `import gelus` still succeeds
    import torch as _torch  # (for the command line's --version) and each use says why
except Exception as _error:  # a broken torch raises anything at import
    _TORCH_ERROR: Exception | None = _error
else:
    _TORCH_ERROR = None
    del _torch

if _TORCH_ERROR is not None:

    def __getattr__(name: str):
        """Every name of the library: the ImportError of the torch it needs."""
        if name.startswith("__"):  # hasattr(gelus, "__wrapped__") and the like: plainly absent
            raise AttributeError(name)
        raise ImportError(
            f"gelus needs torch, which does not import here ({type(_TORCH_ERROR).__name__}: "
            f"{_TORCH_ERROR}); install it: pip install torch"
        ) from _TORCH_ERROR

else:
    from gelus import _cuda, functional, init
    from gelus._patch import PatchReport, patch
    from gelus.modules import (
        GEGLU,
        GELU,
        XIELU,
        BiasGELU,
        ClampedSwiGLU,
        ClippedGELU,
        GeneralizedGELU,
        HardMish,
        Laplace,
        QuickGELU,
        ReGLU,
        ReLU2,
        SiLU,
        SqrtSoftplus,
        StochasticGELU,
        SwiGLU,
        Swish,
        TorchScriptUnsupportedError,
    )
    from gelus.registry import (
        ALIASES,
        UnknownActivationError,
        get_activation,
        list_activations,
        resolve_activation,
    )

    _cuda.register()  # the Triton kernels as the operators' CUDA implementation (no Triton import)

    def __getattr__(name: str):
        """``gelus.audit`` and ``gelus.AuditReport``, imported on first use: ``import gelus``
        loads no audit code."""
        if name in ("audit", "AuditReport"):
            from gelus import _audit

            return getattr(_audit, name)
        raise AttributeError(f"module 'gelus' has no attribute {name!r}")


__all__ = [
    "ALIASES",
    "GEGLU",
    "GELU",
    "XIELU",
    "AuditReport",
    "BiasGELU",
    "ClampedSwiGLU",
    "ClippedGELU",
    "GeneralizedGELU",
    "HardMish",
    "Laplace",
    "PatchReport",
    "QuickGELU",
    "ReGLU",
    "ReLU2",
    "SiLU",
    "SqrtSoftplus",
    "StochasticGELU",
    "SwiGLU",
    "Swish",
    "TorchScriptUnsupportedError",
    "UnknownActivationError",
    "__version__",
    "audit",
    "functional",
    "get_activation",
    "init",
    "list_activations",
    "patch",
    "resolve_activation",
]
