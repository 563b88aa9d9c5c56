"""``gelus bench transformer``: the transformer engine's training step against a plain loop and GEMM.

In one process on one thread (``--device cuda``: on the GPU, every row under bf16 autocast as the
engine trains there, each timing ending in a device sync), round by round (interleaved, median
of rounds), at the
``transformer-lm`` shape (d 128, 4 layers, 4 heads, context 128, batch 16 by default):

* plain loop: a byte GPT written the obvious way, nanoGPT-style (the same shapes: pre-norm,
  causal SDPA, tied head, no biases, ``F.gelu`` in the FFN), AdamW with β₂ 0.95, clipping, one
  model at a time, a batch gathered from random offsets per step;
* the engine: :class:`~gelus.experiments.engines.transformer.engine.TransformerEngine` training one run of each
  requested activation (its steps alone: ``train_epoch`` over ``--steps`` steps), so each
  activation's time per step is measured under the same conditions as the others; by default
  ``torch_gelu`` (torch's ``F.gelu`` as a user's activation) beside gelus's ``gelu``, so the
  engine's own overhead (``F.gelu`` in both) is one row and gelus's GELU in the engine another;
* with ``--stack M``: :class:`~gelus.experiments.engines.transformer.stacked.StackedTransformerEngine`
  training M runs of the first activation at once (M seeds), its time per member-step (a step's
  time over M) beside the one-run engine's, which is what ``train.stack`` chooses between;
* ``torch.bmm`` of [8, 512, 512] × [8, 512, 512]: the machine's matmul rate (bf16 on CUDA).

Reported per row: s/step (per member-step for the stacked row), the ratio to the plain loop, and
model FLOP/s — training FLOPs per token (6·N + 6·layers·context·d,
:func:`~gelus.experiments.engines.transformer.models.flops_per_token`) times the tokens of a step, over
its time — as a fraction of the bmm rate.
"""

import argparse
import json
import math

from gelus.experiments.files import atomic_write

__all__ = ["add_arguments", "check_arguments", "main"]

# torch_gelu: the plain loop's own F.gelu inside the engine, so its row is the engine's overhead
TORCH_GELU = "torch_gelu=torch.nn.functional:gelu"
ACTIVATIONS = ("gelu", TORCH_GELU, "relu", "swiglu")
TARGET_VS_PLAIN = 1.05  # the engine must not cost more than 5 % over the obvious loop...
TARGET_OF_BMM = 0.60  # ...nor fall under 60 % of the machine's matmul rate in model FLOPs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``gelus bench transformer``."""
    parser.add_argument(
        "--activations",
        nargs="+",
        default=list(ACTIVATIONS),
        help=f"engine rows (default {' '.join(ACTIVATIONS)})",
    )
    parser.add_argument("--d-model", type=int, default=128, help="residual width (default 128)")
    parser.add_argument("--layers", type=int, default=4, help="blocks (default 4)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    parser.add_argument("--context", type=int, default=128, help="bytes of context (default 128)")
    parser.add_argument("--batch", type=int, default=16, help="windows per step (default 16)")
    parser.add_argument("--steps", type=int, default=5, help="steps per row per round (default 5)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--stack",
        type=int,
        default=0,
        metavar="M",
        help="also time M runs of the first activation stacked (default 0: none)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where every row runs (default cpu, one thread; cuda: bf16 autocast)",
    )
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")


# the config key each option sets (_config), so a range the presets' checks refuse names the option
_FLAGS = {
    "model.d_model": "d_model", "model.layers": "layers", "model.heads": "heads",
    "model.context": "context", "train.batch_size": "batch", "train.steps_per_epoch": "steps",
}  # fmt: skip


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_arguments(args: argparse.Namespace) -> None:
    """Raise CommandError naming the first option out of range, by the checks the presets'
    configs pass (``gelus.experiments.config.failed_checks``: the same ranges, the same order)."""
    import dataclasses

    from gelus.experiments.config import failed_checks
    from gelus.experiments.errors import CommandError

    def named(text: str) -> str:  # a config key as the option that sets it, with its value
        for key, dest in _FLAGS.items():
            text = text.replace(key, f"{_flag(dest)} ({getattr(args, dest)})")
        return text

    if args.rounds < 1:
        raise CommandError(f"--rounds {args.rounds}: expected at least 1 (medians want 5 or more)")
    config = _config(args)
    for key, expected in failed_checks(config):
        if key in _FLAGS:
            option = _flag(_FLAGS[key])
            value = getattr(args, _FLAGS[key])
            raise CommandError(f"{option} {value}: invalid value; expected {named(expected)}")
    if args.stack != 0:  # M stacked runs: the presets' range of train.seeds
        stacked = dataclasses.replace(
            config, train=dataclasses.replace(config.train, seeds=args.stack)
        )
        for key, expected in failed_checks(stacked):
            if key == "train.seeds":
                raise CommandError(
                    f"--stack {args.stack}: invalid value; expected 0 (none) or {expected}"
                )
    _check_memory(args, config)  # once every size is in its range


def _check_memory(args: argparse.Namespace, config) -> None:
    """CommandError when the rows' models and data need more memory than the device has: the
    presets' estimate (``memory_bytes``: weights, AdamW and one batch's activations, of the
    ``--stack`` runs where they are more) plus the bench's random corpus, before any is built."""
    from gelus.experiments.device import memory_of
    from gelus.experiments.engines.transformer.config import memory_bytes
    from gelus.experiments.errors import CommandError, size_text

    estimate, keys = memory_bytes(config, config.model.context, max(1, args.stack))
    estimate += _corpus_bytes(args)
    total, _ = memory_of(args.device)
    if total is None or estimate <= total:
        return
    flags = dict.fromkeys(_flag(_FLAGS[key]) for key in keys if key in _FLAGS)
    flags |= {"--stack": None} if args.stack > 1 else {}
    options = ", ".join(f"{flag} {getattr(args, flag[2:].replace('-', '_'))}" for flag in flags)
    where = "this machine's memory" if args.device == "cpu" else "the GPU's memory"
    raise CommandError(
        f"{options}: one step needs about {size_text(estimate)}, {estimate / total:,.1f}× {where} "
        f"({size_text(total)}); lower them"
    )


def _corpus_bytes(args: argparse.Namespace) -> int:
    """Bytes of the random corpus the rows train on: 8 windows of context + 1 bytes per sample."""
    return max(4, args.batch + 4) * (args.context + 1) * 8 + 8 * (args.context + 1)


def _config(args):
    from gelus.experiments.config import apply_overrides
    from gelus.experiments.engines.transformer.config import TransformerExperimentConfig

    return apply_overrides(
        TransformerExperimentConfig(),
        [
            f"model.d_model={args.d_model}",
            f"model.layers={args.layers}",
            f"model.heads={args.heads}",
            f"model.context={args.context}",
            f"train.batch_size={args.batch}",
            f"train.steps_per_epoch={args.steps}",
            "train.seeds=1",
            "optim.lr=1e-3",
            "activations=gelu",
        ],
    )


class _PlainGPT:
    """The obvious byte GPT and its training step (what a user would write without the harness)."""

    def __init__(self, args, data) -> None:
        import torch
        import torch.nn.functional as F
        from torch import nn

        d, heads, context = args.d_model, args.heads, args.context

        class Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.ln1, self.ln2 = nn.LayerNorm(d, bias=False), nn.LayerNorm(d, bias=False)
                self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
                self.fc, self.out = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

            def forward(self, x):
                b, t, _ = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
                q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
                return x + self.out(F.gelu(self.fc(self.ln2(x))))

        class GPT(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.wte, self.wpe = nn.Embedding(256, d), nn.Embedding(context, d)
                self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
                self.ln = nn.LayerNorm(d, bias=False)

            def forward(self, idx):
                x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
                for block in self.blocks:
                    x = block(x)
                return self.ln(x) @ self.wte.weight.T

        torch.manual_seed(0)
        self.device = torch.device(getattr(args, "device", "cpu"))
        self.model, self.data, self.args = GPT().to(self.device), data.to(self.device), args
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3, betas=(0.9, 0.95))
        self.F, self.torch = F, torch

    def steps(self) -> None:
        torch, args, cuda = self.torch, self.args, self.device.type == "cuda"
        for _ in range(args.steps):
            starts = torch.randint(0, len(self.data) - args.context - 1, (args.batch,))
            window = torch.stack([self.data[s : s + args.context + 1] for s in starts]).long()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                logits = self.model(window[:, :-1])
            loss = self.F.cross_entropy(logits.float().reshape(-1, 256), window[:, 1:].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()


def _engine_rows(args, data):
    """{row: (run its --steps steps, training FLOPs per member-step, members)}."""
    import dataclasses

    import torch

    from gelus.experiments.activation_spec import resolve_activations
    from gelus.experiments.engines.transformer.engine import TransformerEngine
    from gelus.experiments.plan import plan_jobs, train_size

    rows = {}
    for spec in resolve_activations(args.activations):
        config = dataclasses.replace(_config(args), activations=(spec.text,))
        (job,) = plan_jobs(
            "bench", config, [spec], train_size=train_size(config, 0, 0), out_dir="bench"
        )
        engine = TransformerEngine(job, data, torch.device(args.device))
        tokens = args.batch * args.context
        rows[f"engine {spec.label}"] = (
            lambda engine=engine: engine.train_epoch(1),
            engine.size["flops_per_token"] * tokens,
            1,
        )
    if args.stack > 0:
        rows |= _stacked_row(args, data)
    return rows


def _stacked_row(args, data):
    """{row: (run M stacked members' --steps steps, training FLOPs per member-step, M)}."""
    import dataclasses

    import torch

    from gelus.experiments.activation_spec import resolve_activation
    from gelus.experiments.engines.transformer.stacked import StackedTransformerEngine
    from gelus.experiments.plan import plan_jobs, train_size

    spec = resolve_activation(args.activations[0])
    config = _config(args)
    config = dataclasses.replace(
        config,
        activations=(spec.text,),
        train=dataclasses.replace(config.train, seeds=args.stack, stack="on"),
    )
    (job,) = plan_jobs(
        "bench", config, [spec], train_size=train_size(config, 0, 0), out_dir="bench"
    )
    engine = StackedTransformerEngine(job, data, torch.device(args.device))
    flops = engine.size["flops_per_token"] * args.batch * args.context
    return {
        f"stacked ×{args.stack} {spec.label}": (lambda: engine.train_epoch(1), flops, args.stack)
    }


def _cuda_bmm(shape: tuple[int, int, int], calls: int = 50):
    """A callable doing ``calls`` bf16 ``torch.bmm`` of two ``shape`` tensors on the GPU (synced),
    and its FLOPs."""
    import torch

    batch, rows, inner = shape
    a = torch.randn(batch, rows, inner, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(batch, inner, inner, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(batch, rows, inner, device="cuda", dtype=torch.bfloat16)

    def run() -> None:
        for _ in range(calls):
            torch.bmm(a, b, out=out)
        torch.cuda.synchronize()

    run()  # warm-up: cuBLAS's first call picks its kernel
    return run, calls * 2 * batch * rows * inner * inner


def _rows(args, times: dict[str, list[float]], rows, bmm_rate: float):
    """The table's rows and the JSON's results, per timed row but the bmm: seconds per
    member-step, against the plain loop's, its model FLOP/s and their share of ``bmm_rate``."""
    from gelus.bench.timing import median

    plain_step = median(times["plain loop (F.gelu)"]) / args.steps
    flops_per_step = rows[next(iter(rows))][1] if rows else math.nan
    table, results = [], {}
    for name, per_call in times.items():
        if name.startswith("bmm"):
            continue
        members = rows[name][2] if name in rows else 1
        step = median(per_call) / args.steps / members  # per member-step
        flops = rows[name][1] if name in rows else flops_per_step  # the plain loop: gelu's shape
        share = flops / step / bmm_rate
        results[name] = {
            "seconds_per_step": step,
            "vs_plain": step / plain_step,
            "model_flops_per_second": flops / step,
            "of_bmm_rate": share,
        }
        meets = step / plain_step <= TARGET_VS_PLAIN and share >= TARGET_OF_BMM
        target = ("yes" if meets else "no") if name.startswith("engine") else ""
        table.append(
            [
                name,
                f"{step * 1e3:.1f} ms",
                f"{step / plain_step:.3f}×",
                f"{flops / step / 1e9:.2f}",
                f"{share:.0%}",
                target,
            ]
        )
    return table, results


def main(args: argparse.Namespace) -> int:
    """Run the benchmark and print its table."""
    import torch

    from gelus.bench.timing import format_table, interleaved_rounds, median
    from gelus.bench.training import _bmm
    from gelus.data.text import random_text

    check_arguments(args)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        from gelus.experiments.errors import CommandError

        raise CommandError("--device cuda: this machine has no CUDA device")
    torch.set_num_threads(1)
    data = random_text((_corpus_bytes(args) - 8 * (args.context + 1), 8 * (args.context + 1)))
    plain = _PlainGPT(args, data.train.data)
    rows = _engine_rows(args, data)
    bmm, bmm_flops = _cuda_bmm((8, 512, 512)) if cuda else _bmm((8, 512, 512))
    candidates = {"plain loop (F.gelu)": plain.steps} | {k: f for k, (f, *_) in rows.items()}
    candidates["bmm [8, 512, 512]"] = bmm
    times = interleaved_rounds(candidates, args.rounds, calls=dict.fromkeys(candidates, 1))
    bmm_rate = bmm_flops / median(times["bmm [8, 512, 512]"])
    table, results = _rows(args, times, rows, bmm_rate)
    where = "CUDA, bf16 autocast" if cuda else "one thread"
    print(
        f"{where}, d {args.d_model}, {args.layers} layers, context {args.context}, batch "
        f"{args.batch}; median of {args.rounds} interleaved rounds of {args.steps} steps; bmm "
        f"[8, 512, 512]: {bmm_rate / 1e9:.2f} GFLOP/s; model FLOPs = 6·N + 6·layers·context·d "
        "per token"
    )
    print(format_table(["row", "s/step", "vs plain", "GFLOP/s", "of bmm", "target"], table))
    print(
        f"target: an engine row within {TARGET_VS_PLAIN:.2f}× the plain loop's step and at "
        f"{TARGET_OF_BMM:.0%} or more of the bmm rate"
    )
    if args.json:
        with atomic_write(args.json, "w", encoding="utf-8") as out:
            json.dump({"bmm_flops_per_second": bmm_rate, "rows": results}, out, indent=1)
    return 0
