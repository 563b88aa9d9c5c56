"""A GPT-2-small training step with each activation, eager and compiled: the end-to-end check.

    python -m gelus.bench.gpt2_step                      # CUDA: 12 layers, batch 8 × 1024
    python -m gelus.bench.gpt2_step --activations torch-tanh,torch-exact,gelu,gelu_new,triton-exact

One step = forward under bf16 autocast, cross-entropy, backward, fused AdamW, zero_grad. The model
is the transformer-lm preset's :class:`~gelus.experiments.transformer_models.ByteGPT` (the
project's one GPT definition) at GPT-2 small's shape: GPT-2's 50257-token vocabulary, token and
learned position embeddings, 12 pre-LayerNorm blocks of causal attention
(``F.scaled_dot_product_attention``) and a 768 → 3072 → 768 MLP with the activation under test, a
final LayerNorm and a tied head, GPT-2's init (``init_parameters``, seed 0). It differs from
GPT-2 small in having no biases (in the linear layers and the LayerNorms: 0.1 M of GPT-2's 124 M
parameters) and no dropout; a step's time barely depends on either. A gated registry activation
(``geglu``) gets the FFN width of equal parameters, as in the preset. Random tokens: a step's time
does not depend on the weights or the text.

Activations: ``torch-tanh`` (``nn.GELU(approximate="tanh")``) and ``torch-exact`` (``nn.GELU()``)
are the baselines; any gelus registry name (``gelu``, ``gelu_new``, ...) is the library as it
stands (its CUDA route once the operators use the Triton kernels); ``triton-exact`` /
``triton-tanh`` call the Triton kernels directly through a minimal autograd Function, to measure
them before they are wired into the operators. Times: median of ``--steps`` steps after
``--warmup`` steps, with CUDA events (wall clock on CPU), interleaved activation by activation.
"""

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gelus.experiments.activation_spec import ActivationSpec, resolve_activation
from gelus.experiments.transformer_config import TransformerModelConfig
from gelus.experiments.transformer_models import ByteGPT, init_parameters

__all__ = ["GPTConfig", "activation_spec", "gpt2_model", "main", "make_activation", "measure"]

# The rows that are not registry names: torch's baselines and the Triton kernels called directly.
BENCH_ACTIVATIONS = ("torch-tanh", "torch-exact", "triton-exact", "triton-tanh")


@dataclass(frozen=True)
class GPTConfig:
    """The bench's shape: GPT-2 small's model and the batch of one step."""

    layers: int = 12  # GPT-2 small
    width: int = 768  # embedding size; the MLP is 4× wider
    heads: int = 12
    vocab: int = 50257
    context: int = 1024  # sequence length
    batch: int = 8

    def model_config(self) -> TransformerModelConfig:
        return TransformerModelConfig(
            d_model=self.width, layers=self.layers, heads=self.heads, context=self.context,
            norm="layernorm", ffn_mult=4, init_std=0.02,
        )  # fmt: skip


class _TritonGELU(torch.autograd.Function):
    """gelu through gelus._triton.ops, saving only x (the operators' design, minus everything else).

    ``ops`` is set by :class:`TritonGELU` when a model is built, outside any compiled region:
    dynamo warns when it traces through ``load()``'s functools cache."""

    ops = None

    @staticmethod
    def forward(ctx, x: Tensor, approximate: str) -> Tensor:
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return _TritonGELU.ops.gelu_forward(x, approximate)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return _TritonGELU.ops.gelu_backward(grad, x, ctx.approximate), None


class TritonGELU(nn.Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        from gelus._triton import load

        _TritonGELU.ops = load()  # cached: every module sets the same ops
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return _TritonGELU.apply(x, self.approximate)


def make_activation(name: str) -> nn.Module:
    """A fresh activation module for a row name (see the module docstring)."""
    if name == "torch-tanh":
        return nn.GELU(approximate="tanh")
    if name == "torch-exact":
        return nn.GELU()
    if name in ("triton-exact", "triton-tanh"):
        return TritonGELU("none" if name == "triton-exact" else "tanh")
    from gelus.registry import get_activation

    return get_activation(name)


def activation_spec(name: str) -> ActivationSpec:
    """The row's activation as the spec ByteGPT builds its FFNs from: a registry name through the
    harness's resolver (which knows the gated ones; an unknown name fails with the list of names),
    the torch baselines and the Triton Function as plain factories."""
    if name not in BENCH_ACTIVATIONS:
        return resolve_activation(name)
    return ActivationSpec(
        text=name, label=name, kind="factory", canonical="", approximate="none",
        stochastic=False, gated=False, parameters=False, factory=partial(make_activation, name),
    )  # fmt: skip


def gpt2_model(config: GPTConfig, activation: str) -> ByteGPT:
    """The preset's ByteGPT at ``config``'s shape with GPT-2's init (seed 0), on the CPU."""
    model = ByteGPT(config.model_config(), activation_spec(activation), vocab=config.vocab)
    init_parameters(model, seed=0, std=0.02, layers=config.layers)
    return model


def measure(config: GPTConfig, activations: list[str], compiled: bool, steps: int, warmup: int,
            device: str, log=print) -> dict[str, float]:  # fmt: skip
    """Median seconds per training step for each activation (rounds interleaved)."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    tokens = torch.randint(config.vocab, (config.batch, config.context + 1), generator=generator)
    inputs, targets = tokens[:, :-1].to(device), tokens[:, 1:].to(device)
    dtype = torch.bfloat16
    runs = {}
    for name in activations:
        model = gpt2_model(config, name).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
        forward = torch.compile(model) if compiled else model

        def step(model=model, forward=forward, optimizer=optimizer) -> None:
            with torch.autocast(device_type=device, dtype=dtype):
                logits = forward(inputs)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for _ in range(warmup):
            step()
        runs[name] = step
        log(f"{name}: warmed up ({'compiled' if compiled else 'eager'})")
    times = {name: [] for name in activations}
    for _ in range(steps):
        for name, step in runs.items():
            times[name].append(_time_one(step, device))
    return {name: statistics.median(samples) for name, samples in times.items()}


def _time_one(step, device: str) -> float:
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3
    begin = time.perf_counter()
    step()
    return time.perf_counter() - begin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--activations", default="torch-tanh,torch-exact,gelu,gelu_new,triton-exact,triton-tanh"
    )
    parser.add_argument("--modes", default="eager,compiled", help="eager, compiled or both")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--layers", type=int, default=GPTConfig.layers)
    parser.add_argument("--width", type=int, default=GPTConfig.width)
    parser.add_argument("--heads", type=int, default=GPTConfig.heads)
    parser.add_argument("--vocab", type=int, default=GPTConfig.vocab)
    parser.add_argument("--context", type=int, default=GPTConfig.context)
    parser.add_argument("--batch", type=int, default=GPTConfig.batch)
    args = parser.parse_args(argv)
    config = GPTConfig(args.layers, args.width, args.heads, args.vocab, args.context, args.batch)
    activations = [a.strip() for a in args.activations.split(",") if a.strip()]
    for name in activations:
        activation_spec(name)  # an unknown name fails here, with the list of names
    print(f"GPT-2 step: {config}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
          + f", torch {torch.__version__}; median of {args.steps} steps")  # fmt: skip
    for mode in (m.strip() for m in args.modes.split(",")):
        seconds = measure(config, activations, mode == "compiled", args.steps, args.warmup,
                          args.device, log=lambda message: print(message, file=sys.stderr))  # fmt: skip
        base = seconds.get("torch-exact")
        print(f"\n{mode}\n\n| activation | ms/step | ÷ nn.GELU() |\n|---|---|---|")
        for name, value in seconds.items():
            ratio = f"{value / base:.3f}" if base else "n/a"
            print(f"| {name} | {value * 1e3:.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
