"""Initialization gains for the family. PLACEHOLDER (scaffold)."""

__all__: list[str] = []
