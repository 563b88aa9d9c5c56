"""gelus: the GELU family for PyTorch, and a reproduction harness for the GELU paper.

``import gelus`` loads the activation library only (torch, no plotting or data code).
"""

from gelus import functional, init
from gelus.modules import GELU
from gelus.registry import get_activation, list_activations

__version__ = "0.1.0"

__all__ = ["GELU", "__version__", "functional", "get_activation", "init", "list_activations"]
