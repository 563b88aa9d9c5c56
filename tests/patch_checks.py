"""What "patched gives the original's function" means in the patch tests (torch, Hugging Face,
timm): the same outputs and the same gradients, the input's and every parameter's."""

import torch
from torch import nn


def assert_same_function(original: nn.Module, patched: nn.Module, x: torch.Tensor) -> None:
    """Outputs, the input's gradient and every parameter's gradient equal to float tolerance."""
    original.zero_grad(set_to_none=True)
    patched.zero_grad(set_to_none=True)
    xa = x.clone().requires_grad_()
    xb = x.clone().requires_grad_()
    ya, yb = original(xa), patched(xb)
    torch.testing.assert_close(yb, ya)
    weights = torch.randn(ya.shape, dtype=ya.dtype, generator=torch.Generator().manual_seed(1))
    (ya * weights).sum().backward()
    (yb * weights).sum().backward()
    torch.testing.assert_close(xb.grad, xa.grad)
    for (name, pa), (_, pb) in zip(
        original.named_parameters(), patched.named_parameters(), strict=True
    ):
        torch.testing.assert_close(pb.grad, pa.grad, msg=name)
