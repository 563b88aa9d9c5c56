"""The byte-level GPT of the transformer presets: pre-norm decoder blocks whose FFN activation is
the experiment's swept axis.

Shapes: B windows, T ≤ context bytes, d = d_model, H heads of d / H, hidden width h.
``ByteGPT(idx [B, T] int64) -> logits [B, T, 256]``: token and learned position embeddings, then
``layers`` blocks ``x ← x + attn(norm(x)); x ← x + ffn(norm(x))`` with causal
``F.scaled_dot_product_attention``, a final norm, and the head tied to the token embedding. No
linear layer has a bias.

The FFN is ``down(act(up(x)))``. An elementwise activation has ``up: d → mult·d``; a gated one
(``ActivationSpec.gated``: it maps ``[..., 2h]`` to ``[..., h]`` as ``a·f(b)`` for the halves
``[a, b]``, the library's ``geglu`` convention) has ``up: d → 2h`` with h =
``gated_hidden(d, mult)``, so both FFNs hold about 2·mult·d² weights.

Each parameter is drawn from its own generator, seeded by the run's seed and the parameter's
name (:func:`init_parameters`): two runs of one seed start from the same embeddings, attention
and norms whatever their activations, and from the same FFN weights wherever the shapes agree.
"""

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.transformer_config import TransformerModelConfig, gated_hidden

__all__ = ["VOCAB", "ByteGPT", "FeedForward", "RMSNorm", "ffn_hidden", "init_parameters"]

VOCAB = 256  # byte values


class RMSNorm(nn.Module):
    """x / √(mean(x²) + ε) · weight over the last dimension (Zhang & Sennrich 2019)."""

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def _norm(cfg: TransformerModelConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model)
    return nn.LayerNorm(cfg.d_model, bias=False)


def ffn_hidden(cfg: TransformerModelConfig, gated: bool) -> int:
    """The FFN's hidden width h: mult·d elementwise, ``gated_hidden(d, mult)`` gated."""
    return gated_hidden(cfg.d_model, cfg.ffn_mult) if gated else cfg.ffn_mult * cfg.d_model


class FeedForward(nn.Module):
    """down(act(up(x))): [B, T, d] -> [B, T, d]; ``up`` is d -> h (elementwise) or d -> 2h (gated)."""

    def __init__(self, cfg: TransformerModelConfig, activation: ActivationSpec) -> None:
        super().__init__()
        hidden = ffn_hidden(cfg, activation.gated)
        self.up = nn.Linear(cfg.d_model, 2 * hidden if activation.gated else hidden, bias=False)
        self.act = activation.build()
        self.down = nn.Linear(hidden, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.act(self.up(x)))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: [B, T, d] -> [B, T, d]."""

    def __init__(self, cfg: TransformerModelConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, T, d/H]
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """x + attn(norm(x)), then + ffn(norm(x)): pre-norm."""

    def __init__(self, cfg: TransformerModelConfig, activation: ActivationSpec) -> None:
        super().__init__()
        self.norm1, self.attn = _norm(cfg), CausalSelfAttention(cfg)
        self.norm2, self.ffn = _norm(cfg), FeedForward(cfg, activation)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class ByteGPT(nn.Module):
    """A decoder-only byte-level language model: idx [B, T] int64 -> logits [B, T, 256]."""

    def __init__(self, cfg: TransformerModelConfig, activation: ActivationSpec) -> None:
        super().__init__()
        self.context = cfg.context
        self.embed = nn.Embedding(VOCAB, cfg.d_model)
        self.position = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, activation) for _ in range(cfg.layers))
        self.norm = _norm(cfg)

    def forward(self, idx: Tensor) -> Tensor:
        t = idx.shape[1]
        if t > self.context:
            raise ValueError(f"{t} bytes is more than the model's context of {self.context}")
        x = self.embed(idx) + self.position(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.embed.weight.T  # the head tied to the embedding


def _generator(seed: int, name: str) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


@torch.no_grad()
def init_parameters(model: ByteGPT, seed: int, std: float, layers: int) -> None:
    """GPT-2's init, each matrix from its own generator (seed, name): N(0, std²) for embeddings
    and linear weights, std/√(2·layers) for the projections into the residual stream
    (``attn.proj``, ``ffn.down``). Norms keep their ones and the activation's own parameters
    (generalized GELU's μ, σ) their constructor's values. Drawn on the CPU, then copied, so the
    init does not depend on the device."""
    residual = std / math.sqrt(2 * layers)
    for name, param in model.named_parameters():
        if param.ndim < 2 or ".act." in f".{name}":
            continue
        scale = residual if name.endswith(("attn.proj.weight", "ffn.down.weight")) else std
        values = torch.randn(param.shape, generator=_generator(seed, name)) * scale
        param.copy_(values.to(param.dtype))
