"""Writing figures: one PNG (for the Markdown report and the README) and one SVG per figure."""

from pathlib import Path

from matplotlib.figure import Figure

from gelus.experiments.files import atomic_write

__all__ = ["save_figure"]


def save_figure(fig: Figure, out_dir: str | Path, stem: str) -> tuple[Path, Path]:
    """Write ``fig`` as ``stem.png`` (150 dpi) and ``stem.svg`` under ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{stem}.png", out_dir / f"{stem}.svg"
    with atomic_write(png, "wb") as handle:  # an interrupted report keeps the previous figure
        fig.savefig(handle, format="png", dpi=150)
    with atomic_write(svg, "wb") as handle:
        fig.savefig(handle, format="svg")
    return png, svg
