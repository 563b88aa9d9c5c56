"""`gelus plot activations [--out DIR]`: Figure 1, derivatives, approximation and float32 errors."""

import argparse
from pathlib import Path

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="draw figures of the activation functions",
        description="Draw figures of the activation functions (no training records needed).",
    )
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    activations = kinds.add_parser(
        "activations",
        help="Figure 1 (GELU, ReLU, ELU), derivatives, approximation errors and the float32 accuracy table",
        description="Write the paper's Figure 1 (GELU, ReLU, ELU), the derivatives, the "
        "approximations' errors and the float32 accuracy table into --out.",
    )
    activations.add_argument(
        "--out", type=Path, default=Path("figures"), help="output directory (default: figures)"
    )
    activations.add_argument(
        "--points",
        type=int,
        default=1 << 18,
        help="float32 inputs sampled per region for the accuracy table (default: 262144)",
    )
    activations.set_defaults(func=_plot_activations)


def _plot_activations(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import torch

    from gelus.experiments.errors import CommandError
    from gelus.experiments.files import atomic_write
    from gelus.plots import activations
    from gelus.plots.io import save_figure

    if args.points < 16:
        raise CommandError(f"--points {args.points} is too few; use at least 16 (default 262144)")
    torch.set_num_threads(1)
    out = args.out
    written = [
        *save_figure(activations.figure1(), out, "figure1"),
        *save_figure(activations.activations_figure(args.points), out, "activations"),
    ]
    table = activations.accuracy_markdown(activations.accuracy_table(args.points))
    note = (
        "# Accuracy of the GELU family in float32\n\n"
        f"Max error in ulp against a float64 reference on {args.points} float32 inputs per region "
        "(evenly spaced in bit pattern), and the outputs at the edge inputs (one 5-element tensor).\n\n"
    )
    markdown = out / "accuracy.md"
    with atomic_write(markdown, "w", encoding="utf-8") as handle:
        handle.write(note + table)
    print(table)
    for path in [*written, markdown]:
        print(f"wrote {path}")
    return 0
