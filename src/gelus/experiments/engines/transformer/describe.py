"""How the engines built of the transformer blocks (the language model, the ViT) describe their
setup to the report (``EnginePlugin.describe_setup``): the model's shape and the AdamW recipe in
the presets' words, and the language model's training set, from a run's stored flat config."""

from collections.abc import Mapping
from typing import Any

__all__ = ["blocks_setup", "lm_training_set"]

_RECIPE_KEYS = {
    "optim.beta1",
    "optim.beta2",
    "optim.weight_decay",
    "optim.warmup",
    "optim.min_lr",
    "optim.grad_clip",
}


def _model(c: Mapping[str, Any]) -> str | None:
    """The blocks' shape (None where the config lacks them)."""
    if not {"model.d_model", "model.layers", "model.heads"} <= set(c):
        return None
    parts = [f"d {c['model.d_model']}", f"{c['model.layers']} layers", f"{c['model.heads']} heads"]
    if "model.context" in c:
        parts.append(f"context {c['model.context']}")
    if "model.patch" in c:
        parts.append(
            f"{c['model.patch']} × {c['model.patch']} patches, {c.get('model.pool')} pooling"
        )
    return ", ".join([*parts, c.get("model.norm", "layernorm"), "no biases"])


def _optimizer(c: Mapping[str, Any]) -> str | None:
    """The recipe's AdamW settings (None where the run has no such keys)."""
    if not set(c) >= _RECIPE_KEYS:
        return None
    return (
        f"AdamW β {c['optim.beta1']:g} / {c['optim.beta2']:g}, weight decay "
        f"{c['optim.weight_decay']:g} on matrices, warmup {c['optim.warmup'] * 100:g} % then "
        f"cosine to {c['optim.min_lr'] * 100:g} %, clip {c['optim.grad_clip']:g}"
    )


def blocks_setup(flat: Mapping[str, Any]) -> dict[str, str]:
    """{"model": its shape, "optimizer": its recipe}, each where the config has its keys."""
    rows = {"model": _model(flat), "optimizer": _optimizer(flat)}
    return {aspect: text for aspect, text in rows.items() if text is not None}


def lm_training_set(flat: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict[str, str]:
    """{"training set": the windows an epoch draws} where the metadata count them, else {}."""
    size = metadata.get("train_size")
    if "train.steps_per_epoch" not in flat or not isinstance(size, int):
        return {}
    context = flat.get("model.context")
    return {
        "training set": f"{size:,} windows of {context + 1} bytes per epoch, at random offsets "
        "of the training split"
    }
