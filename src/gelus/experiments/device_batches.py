"""Training batches drawn on the device the model trains on: the split uploaded once, an epoch's
random draws uploaded once, crops and flips as one gather per batch, no per-batch host transfer.

The random draws come from the run's CPU ``torch.Generator`` in exactly the order that
:func:`gelus.experiments.engines.cnn.data.random_crop_flip` consumes them batch by batch (the epoch's
permutation, then per batch the crop offsets and the flips), so a run sees the same batches on
every device and a checkpoint's generator state means the same thing on CPU and GPU::

    padded = pad_once(x_train, padding)                      # [N, C, H + 2p, W + 2p], on device
    plan = draw_epoch(len(x_train), batch_size, generator, padding, device)
    for step in range(plan.steps):
        index, xb = plan.batch(padded, step, flip=True)      # [B], [B, C, H, W]
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["EpochPlan", "draw_epoch", "pad_once"]


def pad_once(x: Tensor, padding: int) -> Tensor:
    """The whole split zero-padded by ``padding`` on each side of H and W: [N, C, H + 2p, W + 2p].

    Padding the split once replaces a pad per batch; a crop of the padded image is the same crop
    as of the padded batch.
    """
    return F.pad(x, (padding, padding, padding, padding)) if padding else x


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's batches: ``order`` int64 [steps, B]; with crops, ``offsets`` int64 [steps, 2, B]
    (row and column offsets in 0..2p) and ``flips`` bool [steps, B]; all on the device."""

    order: Tensor
    offsets: Tensor | None
    flips: Tensor | None
    padding: int

    @property
    def steps(self) -> int:
        return self.order.shape[0]

    def batch(self, padded: Tensor, step: int, flip: bool) -> tuple[Tensor, Tensor]:
        """(index [B], inputs [B, C, H, W]) of batch ``step``, cropped and flipped as planned.

        out[b, c, i, j] = padded[index_b, c, dy_b + i, dx_b + j'], j' = W − 1 − j where sample b
        is flipped, j otherwise: one gather, no loop, no host sync.
        """
        index = self.order[step]
        if self.offsets is None:
            return index, padded[index]
        h = padded.shape[2] - 2 * self.padding
        w = padded.shape[3] - 2 * self.padding
        device = padded.device
        rows = self.offsets[step, 0, :, None] + torch.arange(h, device=device)  # [B, H]
        cols = self.offsets[step, 1, :, None] + torch.arange(w, device=device)  # [B, W]
        if flip:
            cols = torch.where(self.flips[step][:, None], cols.flip(1), cols)
        channels = torch.arange(padded.shape[1], device=device)[None, :, None, None]
        inputs = padded[
            index[:, None, None, None], channels, rows[:, None, :, None], cols[:, None, None, :]
        ]
        return index, inputs


def draw_epoch(
    n: int,
    batch_size: int,
    generator: torch.Generator,
    padding: int | None,
    device: torch.device | str,
) -> EpochPlan:
    """Draw an epoch's permutation (and, with ``padding``, each batch's crops and flips) from the
    CPU ``generator`` and upload them to ``device`` in one transfer each.

    The draws are those of a per-batch loop over ``random_crop_flip``: ``randperm(n)``, then for
    each of the ⌊n / batch_size⌋ batches ``randint(0, 2p + 1, (2, B))`` and ``randint(0, 2, (B,))``.
    The last partial batch is dropped.
    """
    steps = n // batch_size
    if steps == 0:
        raise ValueError(f"{n} training samples is less than one batch of {batch_size}")
    permutation = torch.randperm(n, generator=generator)
    order = permutation[: steps * batch_size].view(steps, batch_size)
    offsets = flips = None
    if padding is not None:
        offsets = torch.empty(steps, 2, batch_size, dtype=torch.int64)
        flips = torch.empty(steps, batch_size, dtype=torch.bool)
        for step in range(steps):  # the per-batch order of draws of random_crop_flip
            offsets[step] = torch.randint(0, 2 * padding + 1, (2, batch_size), generator=generator)
            flips[step] = torch.randint(0, 2, (batch_size,), generator=generator).bool()
        offsets, flips = offsets.to(device), flips.to(device)
    return EpochPlan(order.to(device), offsets, flips, padding or 0)
