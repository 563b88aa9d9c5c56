"""The report's content as blocks (heading, paragraph, table, figure, banner, details), built by
the section builders and rendered by :mod:`gelus.report.render` as HTML and Markdown."""

from pathlib import Path
from typing import NamedTuple

__all__ = ["Block"]


class Block(NamedTuple):
    kind: str  # "h1" | "h2" | "h3" | "p" | "banner" | "table" | "figure" | "details"
    text: str = ""  # details: the line a reader clicks to open it
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    image: Path | None = None  # figure: the PNG file
    children: tuple["Block", ...] = ()  # details: what it holds, shown on demand
