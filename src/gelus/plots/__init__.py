"""Figures of the activation functions themselves: `gelus plot activations`."""

__all__: list[str] = []
