"""nn.Module wrappers. PLACEHOLDER (scaffold): the family's modules are filled in by the library work."""

from torch import Tensor, nn

from gelus import functional as F


class GELU(nn.Module):
    """GELU(x) = x·Φ(x), or its ``approximate`` form."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"
