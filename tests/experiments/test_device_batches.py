"""Device-resident batches: the same batches as the per-batch CPU path, from the same generator."""

import pytest
import torch

from gelus.experiments.device_batches import draw_epoch, pad_once
from gelus.experiments.engines.cnn.data import random_crop_flip

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _images(n=37, c=3, h=8, w=6):
    return torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flip", [True, False])
def test_an_epoch_equals_the_per_batch_cpu_loop(device, flip):
    x, batch, padding = _images(), 8, 2
    reference_generator = torch.Generator().manual_seed(5)
    order = torch.randperm(len(x), generator=reference_generator)
    expected = []
    for step in range(len(x) // batch):
        index = order[step * batch : (step + 1) * batch]
        expected.append((index, random_crop_flip(x[index], padding, flip, reference_generator)))

    plan = draw_epoch(len(x), batch, torch.Generator().manual_seed(5), padding, device)
    padded = pad_once(x.to(device), padding)
    assert plan.steps == len(expected) == 4
    for step, (index, inputs) in enumerate(expected):
        got_index, got_inputs = plan.batch(padded, step, flip)
        assert torch.equal(got_index.cpu(), index)
        assert torch.equal(got_inputs.cpu(), inputs)


def test_the_generator_ends_in_the_state_of_the_per_batch_loop():
    x, batch, padding = _images(), 8, 2
    reference = torch.Generator().manual_seed(9)
    order = torch.randperm(len(x), generator=reference)
    for step in range(len(x) // batch):
        random_crop_flip(x[order[step * batch : (step + 1) * batch]], padding, True, reference)
    planned = torch.Generator().manual_seed(9)
    draw_epoch(len(x), batch, planned, padding, "cpu")
    assert torch.equal(planned.get_state(), reference.get_state())  # checkpoints stay valid


def test_same_seed_same_batches_other_seed_other_batches():
    x = _images()
    padded = pad_once(x, 4)

    def first_batch(seed):
        return draw_epoch(len(x), 8, torch.Generator().manual_seed(seed), 4, "cpu").batch(
            padded, 0, True
        )[1]

    assert torch.equal(first_batch(3), first_batch(3))
    assert not torch.equal(first_batch(3), first_batch(4))


def test_without_crops_batches_are_rows_of_the_permutation():
    x = _images()
    plan = draw_epoch(len(x), 10, torch.Generator().manual_seed(2), None, "cpu")
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(2))
    assert plan.offsets is None and plan.steps == 3
    index, inputs = plan.batch(x, 1, flip=False)
    assert torch.equal(index, order[10:20]) and torch.equal(inputs, x[order[10:20]])


def test_crops_keep_pixels_in_place_and_flips_mirror():
    x = torch.arange(2 * 1 * 3 * 4, dtype=torch.float32).view(2, 1, 3, 4)
    plan = draw_epoch(2, 2, torch.Generator().manual_seed(0), 0, "cpu")
    index, inputs = plan.batch(pad_once(x, 0), 0, flip=True)
    for b in range(2):
        original = x[index[b]]
        assert torch.equal(inputs[b], original.flip(-1) if plan.flips[0, b] else original)


def test_fewer_samples_than_a_batch_is_an_error():
    with pytest.raises(ValueError, match="less than one batch of 64"):
        draw_epoch(10, 64, torch.Generator(), 4, "cpu")
