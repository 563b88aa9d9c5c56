"""gelus: the GELU family for PyTorch, and a reproduction harness for the GELU paper.

``import gelus`` loads the activation library only (torch, no plotting or data code), and
registers its operators (``torch.ops.gelus.*``).

    gelus.functional      pure functions: gelu, silu, swish, generalized_gelu, stochastic_gelu, …
    gelus.GELU, …         one nn.Module per function
    gelus.get_activation  name (or alias such as Hugging Face's "gelu_new") -> fresh module
    gelus.init            calculate_gain and init_layer_ for every registered activation
    gelus.patch           put gelus's members into a built model (torch, Hugging Face, timm)
    gelus.integrations    Hugging Face's hidden_act and timm's act_layer names ("gelus:…")
"""

from gelus import _cuda, functional, init
from gelus._patch import PatchReport, patch
from gelus.modules import (
    GEGLU,
    GELU,
    XIELU,
    BiasGELU,
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

__version__ = "0.1.0"

__all__ = [
    "ALIASES",
    "GEGLU",
    "GELU",
    "XIELU",
    "BiasGELU",
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
    "functional",
    "get_activation",
    "init",
    "list_activations",
    "patch",
    "resolve_activation",
]
