"""Data for the CIFAR experiments: whole splits as tensors, ZCA whitening, crops and flips.

Everything works on float32 tensors held in memory; augmentation is a batched gather, not a
DataLoader with per-image transforms.
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["apply_zca", "fit_zca", "load_splits", "mean_image", "random_crop_flip"]


def mean_image(x: Tensor, chunk_size: int = 4096) -> Tensor:
    """The mean of ``x`` [N, *shape] over N, summed in float64 chunk by chunk; float32 [*shape],
    on ``x``'s device."""
    total = torch.zeros(x.shape[1:], dtype=torch.float64, device=x.device)
    for start in range(0, x.shape[0], chunk_size):
        total += x[start : start + chunk_size].double().sum(0)
    return (total / x.shape[0]).float()


def fit_zca(x: Tensor, epsilon: float, chunk_size: int = 4096) -> tuple[Tensor, Tensor]:
    """ZCA whitening fitted on ``x`` [N, *shape]: returns (mean [D], W [D, D]) in float32.

    Σ = (X − m)ᵀ(X − m) / N = U diag(λ) Uᵀ  (float64, ``torch.linalg.eigh``),
    W = U diag(1 / √(λ + ε)) Uᵀ, and the whitened data are (X − m) W. ε regularises the smallest
    eigenvalues (noise directions) instead of blowing them up.
    """
    x = x.flatten(1)
    n, d = x.shape
    mean = mean_image(x, chunk_size).double()
    covariance = torch.zeros(d, d, dtype=torch.float64, device=x.device)
    for start in range(0, n, chunk_size):
        centred = x[start : start + chunk_size].double() - mean
        covariance.addmm_(centred.T, centred)
    covariance /= n
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    scale = (eigenvalues.clamp(min=0) + epsilon).rsqrt()  # rounding can make λ ≈ 0 negative
    whitening = (eigenvectors * scale) @ eigenvectors.T
    return mean.float(), whitening.float()


def apply_zca(x: Tensor, mean: Tensor, whitening: Tensor, chunk_size: int = 4096) -> Tensor:
    """(x − mean) W for ``x`` [N, *shape], in place chunk by chunk (W is symmetric); returns ``x``."""
    mean, whitening = mean.to(x.device), whitening.to(x.device)
    flat = x.view(x.shape[0], -1)
    for start in range(0, flat.shape[0], chunk_size):
        rows = flat[start : start + chunk_size]
        rows.copy_((rows - mean) @ whitening)
    return x


def random_crop_flip(x: Tensor, padding: int, flip: bool, generator: torch.Generator) -> Tensor:
    """Per-sample random crops of the zero-padded batch, then random horizontal flips.

    out[b, c, i, j] = pad(x)[b, c, dy_b + i, dx_b + j'],  dy_b, dx_b ~ U{0..2·padding},
    j' = W − 1 − j where sample b is flipped (probability ½), j otherwise. One gather, no loop.
    The offsets and flips are drawn from ``generator`` (on the CPU).
    """
    b, c, h, w = x.shape
    padded = F.pad(x, (padding, padding, padding, padding))  # [B, C, H + 2p, W + 2p]
    offsets = torch.randint(0, 2 * padding + 1, (2, b), generator=generator).to(x.device)
    flips = torch.randint(0, 2, (b,), generator=generator).bool().to(x.device)
    rows = offsets[0, :, None] + torch.arange(h, device=x.device)  # [B, H]
    cols = offsets[1, :, None] + torch.arange(w, device=x.device)  # [B, W]
    if flip:
        cols = torch.where(flips[:, None], cols.flip(1), cols)
    batch_index = torch.arange(b, device=x.device)[:, None, None, None]
    channel_index = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[batch_index, channel_index, rows[:, None, :, None], cols[:, None, None, :]]


def _load_inputs(split: Any, index: Tensor, chunk_size: int = 10_000) -> Tensor:
    """``split.inputs`` for every sample of ``index``, into one preallocated float32 tensor."""
    out = torch.empty(len(index), *split.sample_shape, dtype=torch.float32)
    for start in range(0, len(index), chunk_size):
        out[start : start + chunk_size] = split.inputs(index[start : start + chunk_size])
    return out


def load_splits(data: Any, retrain_full: bool) -> dict[str, tuple[Tensor, Tensor]]:
    """{"train", "val", "test"} → (inputs float32 [N, C, H, W] in [0, 1], labels int64 [N]).

    ``data`` is a ``gelus.data.Dataset`` loaded with its validation split (CIFAR: the last 5,000
    training images). ``retrain_full`` appends val to train (all 50,000, in file order) and drops
    "val"; a dataset loaded without a val split trains on all of train either way.
    """
    parts = {"train": data.train, "test": data.test}
    if data.val is not None:
        parts["val"] = data.val
    splits = {
        name: (_load_inputs(s, torch.arange(len(s))), s.labels.clone()) for name, s in parts.items()
    }
    if retrain_full and "val" in splits:
        (x_train, y_train), (x_val, y_val) = splits["train"], splits.pop("val")
        splits["train"] = (torch.cat([x_train, x_val]), torch.cat([y_train, y_val]))
    return splits
