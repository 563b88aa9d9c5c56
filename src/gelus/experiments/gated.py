"""Gated activations that the harness names before the library has them: ``swiglu``, ``reglu``.

Each is a·f(b) for x = [a, b] split in halves on the last dimension, the split of the library's
``geglu`` (``gelus.functional.geglu``): SwiGLU with f = SiLU, ReGLU with f = ReLU (Shazeer 2020,
"GLU Variants Improve Transformer"). :mod:`gelus.experiments.activation_spec` builds them only for
a name the registry does not know; once the library registers ``swiglu`` and ``reglu`` its own
members are used.
"""

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["GATED_FALLBACKS", "GatedUnit"]

GATED_FALLBACKS = {"swiglu": F.silu, "reglu": F.relu}  # name -> f of a·f(b)


class GatedUnit(nn.Module):
    """a·f(b) for x = [a, b] halved on the last dimension: [..., 2n] -> [..., n]."""

    gated = True

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.gate = GATED_FALLBACKS[name]

    def forward(self, x: Tensor) -> Tensor:
        a, b = x.chunk(2, dim=-1)
        return a * self.gate(b)

    def extra_repr(self) -> str:
        return self.name
