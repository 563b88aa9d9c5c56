"""The transformer presets' models: the byte-level GPT and the ViT, pre-norm blocks whose FFN
activation is the experiment's swept axis (:class:`PatchViT`: the same blocks without the mask).

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
name, by the config's ``model.init`` (:func:`init_parameters`: gpt2, torch, xavier or he): two runs of one seed start from the same embeddings, attention
and norms whatever their activations, and from the same FFN weights wherever the shapes agree.
"""

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gelus.experiments.activation_spec import ActivationSpec
from gelus.experiments.engines.transformer.config import (
    INITS,
    TransformerModelConfig,
    gated_hidden,
)

__all__ = [
    "VOCAB",
    "Block",
    "ByteGPT",
    "FeedForward",
    "PatchViT",
    "RMSNorm",
    "SelfAttention",
    "ffn_hidden",
    "flops_per_token",
    "init_parameters",
    "norm_layer",
]

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


def norm_layer(cfg: TransformerModelConfig) -> nn.Module:
    """The config's norm over d_model, without bias."""
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


class SelfAttention(nn.Module):
    """Multi-head self-attention, causal (a language model) or not (a ViT): [B, T, d] -> [B, T, d]."""

    def __init__(self, cfg: TransformerModelConfig, causal: bool = True) -> None:
        super().__init__()
        self.heads, self.causal = cfg.heads, causal
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # [B, H, T, d/H]
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """x + attn(norm(x)), then + ffn(norm(x)): pre-norm."""

    def __init__(self, cfg, activation: ActivationSpec, causal: bool = True) -> None:
        super().__init__()
        self.norm1, self.attn = norm_layer(cfg), SelfAttention(cfg, causal)
        self.norm2, self.ffn = norm_layer(cfg), FeedForward(cfg, activation)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class ByteGPT(nn.Module):
    """A decoder-only byte-level language model: idx [B, T] int64 -> logits [B, T, vocab].

    ``vocab`` is 256 (bytes) for the presets; ``gelus.bench.gpt2_step`` passes GPT-2's 50257 to
    time the same model at GPT-2 small's shape. It is an argument, not a config field, so the
    presets' config hashes do not move.
    """

    def __init__(
        self, cfg: TransformerModelConfig, activation: ActivationSpec, vocab: int = VOCAB
    ) -> None:
        super().__init__()
        self.context = cfg.context
        self.embed = nn.Embedding(vocab, cfg.d_model)
        self.position = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, activation) for _ in range(cfg.layers))
        self.norm = norm_layer(cfg)

    def forward(self, idx: Tensor) -> Tensor:
        t = idx.shape[1]
        if t > self.context:
            raise ValueError(f"{t} bytes is more than the model's context of {self.context}")
        x = self.embed(idx) + self.position(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.embed.weight.T  # the head tied to the embedding


class PatchViT(nn.Module):
    """A vision transformer: images [B, C, H, W] -> logits [B, classes].

    Non-overlapping p × p patches, each flattened and projected to d, plus learned positions (and a
    class token with ``pool="cls"``); the blocks without a mask; a final norm; the mean over the
    patches' outputs (or the class token's) into a linear head.
    """

    def __init__(self, cfg, activation: ActivationSpec, image_shape, num_classes: int) -> None:
        super().__init__()
        channels, height, width = image_shape
        if height % cfg.patch or width % cfg.patch:
            raise ValueError(f"patch={cfg.patch} does not divide the {height} × {width} images")
        self.p, self.pool = cfg.patch, cfg.pool
        tokens = (height // cfg.patch) * (width // cfg.patch) + (cfg.pool == "cls")
        self.embed = nn.Linear(channels * cfg.patch**2, cfg.d_model, bias=False)
        self.position = nn.Embedding(tokens, cfg.d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.d_model)) if cfg.pool == "cls" else None
        self.blocks = nn.ModuleList(Block(cfg, activation, causal=False) for _ in range(cfg.layers))
        self.norm = norm_layer(cfg)
        self.head = nn.Linear(cfg.d_model, num_classes, bias=False)

    def forward(self, images: Tensor) -> Tensor:
        b, c, _, _ = images.shape
        p = self.p
        patches = images.unfold(2, p, p).unfold(3, p, p)  # [B, C, H/p, W/p, p, p]
        x = self.embed(patches.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p))
        if self.cls is not None:
            x = torch.cat([self.cls.expand(b, -1, -1), x], dim=1)
        x = x + self.position.weight
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(x[:, 0] if self.cls is not None else x.mean(dim=1))


def flops_per_token(model: nn.Module, d_model: int, layers: int, tokens: int) -> int:
    """Training FLOPs per token (forward and backward): 6·N + 6·layers·tokens·d (Kaplan et al.
    2020), N the weights a token multiplies by (every matrix but the position table, the tied
    head included), the second term attention's scores and weighted sums over ``tokens``
    positions, counted whole: a causal mask would halve what is needed, not what SDPA's math
    path computes. An elementwise activation's own cost (a few FLOPs per hidden unit) is left out.
    """
    weights = sum(
        p.numel() for name, p in model.named_parameters() if p.ndim >= 2 and "position" not in name
    )
    return 6 * weights + 6 * layers * tokens * d_model


def _generator(seed: int, name: str) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def _fans(param: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a matrix as torch.nn.init counts them: a Linear's weight
    [out, in] has fan_in = in; an Embedding's [num, d] fan_in = d, the fan-in of the head tied to
    it."""
    return param.shape[1], param.shape[0]


def _draw(scheme: str, param: Tensor, generator: torch.Generator, embedding: bool) -> Tensor:
    """One matrix of ``scheme`` (not gpt2) from ``generator``, float32 on the CPU."""
    fan_in, fan_out = _fans(param)
    if scheme == "torch" and embedding:
        return torch.randn(param.shape, generator=generator)  # nn.Embedding: N(0, 1)
    if scheme == "torch":  # nn.Linear: kaiming_uniform_(a=√5) = U(±1/√fan_in)
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(param.shape, generator=generator) * 2 - 1) * bound
    if scheme == "xavier":
        std = math.sqrt(2.0 / (fan_in + fan_out))  # Glorot & Bengio's variance, gain 1
    elif scheme == "he":
        std = math.sqrt(2.0 / fan_in)  # He et al.'s ReLU gain √2, fan-in mode
    else:
        raise ValueError(f"unknown init {scheme!r}; use one of {', '.join(INITS)}")
    return torch.randn(param.shape, generator=generator) * std


@torch.no_grad()
def init_parameters(
    model: nn.Module, seed: int, std: float, layers: int, scheme: str = "gpt2"
) -> None:
    """Initialise ``model``'s matrices by ``scheme`` (``model.init``), each from its own generator
    (seed, name), so a seed starts every activation from the same weights wherever the shapes
    agree. Norms keep their ones and the activation's own parameters (generalized GELU's μ, σ)
    their constructor's values; drawn on the CPU, then copied, so the init does not depend on the
    device. Fans as torch.nn.init counts them (a matrix [out, in]: fan_in = in; the embedding
    [vocab, d]: fan_in = d, its tied head's).

    - ``gpt2`` (the default, Radford et al. 2019): N(0, std²) for the embeddings and every linear
      weight, std/√(2·layers) for the projections into the residual stream (``attn.proj``,
      ``ffn.down``); any other tensor of 2 dimensions or more (a ViT's class token) N(0, std²).
    - ``torch``: each module's PyTorch default: ``nn.Embedding`` N(0, 1) (the token embedding,
      tied to the head, and the positions), ``nn.Linear`` U(±1/√fan_in) (kaiming_uniform_ with
      a = √5); ``std`` is not read.
    - ``xavier`` (Glorot & Bengio 2010, normal): every matrix N(0, 2/(fan_in + fan_out)), gain 1.
    - ``he`` (He et al. 2015, normal, fan-in mode): every matrix N(0, 2/fan_in), ReLU's gain √2 for
      every activation: the init the folklore calls too aggressive for GELU. The activation's own
      gain (:func:`gelus.init.calculate_gain`, 1.534 for GELU) is not used: the weights would then
      differ between the activations a seed pairs, and the comparison would not be of one init.

    Under torch, xavier and he no residual projection is scaled and a class token keeps its
    zeros (the module's own default).
    """
    residual = std / math.sqrt(2 * layers)
    embeddings = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
    for name, param in model.named_parameters():
        if param.ndim < 2 or ".act." in f".{name}" or (scheme != "gpt2" and param.ndim != 2):
            continue
        if scheme == "gpt2":
            scale = residual if name.endswith(("attn.proj.weight", "ffn.down.weight")) else std
            values = torch.randn(param.shape, generator=_generator(seed, name)) * scale
        else:
            values = _draw(scheme, param, _generator(seed, name), name in embeddings)
        param.copy_(values.to(param.dtype))
