"""In-memory datasets: a ``Dataset`` of three ``Split``s, each indexed by an int64 tensor.

Batching is by index (``split.inputs(index)``, ``split.labels[index]``), not a DataLoader: the
data are small enough to live in memory as tensors (uint8 where the files are uint8), and each
batch is converted to float32 when it is drawn.
"""

from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["Dataset", "Split", "TensorSplit", "WindowSplit"]


class Split:
    """One split of a dataset: ``labels`` (int64 [N]) and ``inputs(index)`` (float32 [B, *sample_shape])."""

    labels: Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]

    @property
    def sample_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def inputs(self, index: Tensor) -> Tensor:
        """The float32 inputs ``[B, *sample_shape]`` of the samples at ``index`` (int64 [B])."""
        raise NotImplementedError

    def to(self, device: torch.device | str) -> "Split":
        """A copy of this split with its tensors on ``device``."""
        raise NotImplementedError


class TensorSplit(Split):
    """Images stored whole: ``images`` [N, C, H, W], uint8 (scaled to [0, 1]) or float32.

    ``inputs(index) = images[index] / 255`` for uint8 images, ``images[index]`` otherwise.

    >>> split = TensorSplit(torch.zeros(4, 1, 28, 28, dtype=torch.uint8), torch.zeros(4, dtype=torch.long))
    >>> split.inputs(torch.tensor([0, 3])).shape
    torch.Size([2, 1, 28, 28])
    """

    def __init__(self, images: Tensor, labels: Tensor):
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"{images.shape[0]} images but {labels.shape[0]} labels")
        if images.dtype not in (torch.uint8, torch.float32):
            raise TypeError(f"images must be uint8 or float32, got {images.dtype}")
        self.images = images
        self.labels = labels.long()

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.images.shape[1:])

    def inputs(self, index: Tensor) -> Tensor:
        batch = self.images[index]
        if batch.dtype == torch.uint8:
            return batch.float().div_(255)
        return batch

    def to(self, device: torch.device | str) -> "TensorSplit":
        return TensorSplit(self.images.to(device), self.labels.to(device))

    def __repr__(self) -> str:
        return f"TensorSplit(n={len(self)}, sample_shape={self.sample_shape}, dtype={self.images.dtype})"


class WindowSplit(Split):
    """Samples made of rows of a shared table: ``windows`` int64 [N, W] indexes ``table`` float32 [V, D].

    ``inputs(index) = table[windows[index]].reshape(B, W * D)``: for Twitter POS the table holds word
    embeddings and a window is (previous, current, next) word; for TIMIT the table holds the
    standardised frames and a window is the 11 frames around a frame, clamped at the utterance edges.
    """

    def __init__(self, table: Tensor, windows: Tensor, labels: Tensor):
        if windows.ndim != 2 or windows.shape[0] != labels.shape[0]:
            raise ValueError(
                f"windows {tuple(windows.shape)} do not match labels {tuple(labels.shape)}"
            )
        self.table = table.float()
        self.windows = windows.long()
        self.labels = labels.long()

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return (self.windows.shape[1] * self.table.shape[1],)

    def inputs(self, index: Tensor) -> Tensor:
        rows = self.windows[index]  # [B, W]
        return self.table[rows].reshape(rows.shape[0], -1)  # [B, W * D]

    def to(self, device: torch.device | str) -> "WindowSplit":
        return WindowSplit(self.table.to(device), self.windows.to(device), self.labels.to(device))

    def __repr__(self) -> str:
        return f"WindowSplit(n={len(self)}, window={self.windows.shape[1]}, table={tuple(self.table.shape)})"


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: train / val / test splits and where the files came from."""

    name: str
    train: Split
    val: Split | None  # None when the caller asked for the full training set
    test: Split
    num_classes: int
    source: str  # the directory the files were read from
    class_names: tuple[str, ...] = field(default=())

    def to(self, device: torch.device | str) -> "Dataset":
        """A copy with every split's tensors on ``device``."""
        return Dataset(
            self.name,
            self.train.to(device),
            None if self.val is None else self.val.to(device),
            self.test.to(device),
            self.num_classes,
            self.source,
            self.class_names,
        )
