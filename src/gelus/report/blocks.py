"""The report's content as blocks (heading, paragraph, table, figure, banner), built by the
section builders and rendered by :mod:`gelus.report.render` as HTML and Markdown."""

from pathlib import Path
from typing import NamedTuple

__all__ = ["Block"]


class Block(NamedTuple):
    kind: str  # "h1" | "h2" | "h3" | "p" | "banner" | "table" | "figure"
    text: str = ""
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    image: Path | None = None  # figure: the PNG file
