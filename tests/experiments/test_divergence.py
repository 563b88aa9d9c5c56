"""The harness's one divergence rule: non-finite, or a final loss above 10× the trivial predictor's."""

import math

import pytest

from gelus.experiments.divergence import diverged_runs, mark_diverged
from gelus.experiments.records import Record

CLASSIFIER = {"h": {"dataset": "fashion-mnist", "task": "classify"}}  # 10 classes: ln 10 = 2.303
AUTOENCODER = {"h": {"dataset": "fashion-mnist", "task": "autoencode"}}


def _run(run_id, losses, split="test", metric="loss", extra=()):
    """Records of one run: ``losses`` per epoch 1.. on ``split``, plus ``extra`` records."""
    records = [
        Record(run_id, "x", "h", "gelu", 0, 1e-3, "", epoch, split, metric, value)
        for epoch, value in enumerate(losses, start=1)
    ]
    records += [Record(run_id, "x", "h", "gelu", 0, 1e-3, "", *e) for e in extra]
    return records


@pytest.mark.parametrize(
    ("final", "diverged"),
    [(0.4, False), (23.0, False), (23.1, True), (1e27, True), (math.inf, True), (math.nan, True)],
)
def test_a_classifier_diverged_above_ten_times_ln_classes_or_when_not_finite(final, diverged):
    records = _run("a", [0.5, final])
    assert (diverged_runs(records, CLASSIFIER) == {"a"}) is diverged
    assert 10 * math.log(10) == pytest.approx(23.026, abs=1e-3)  # the boundary the cases straddle


def test_only_the_last_epoch_and_the_clean_splits_are_judged():
    recovered = _run("early", [1e9, 0.3])  # a spike that training recovered from
    noisy = _run("noisy", [0.3]) + _run("noisy", [0.3, 80.0], split="test@noise=3")
    errors = _run("errors", [0.3]) + _run("errors", [0.2, 0.95], metric="error")
    assert diverged_runs(recovered + noisy + errors, CLASSIFIER) == set()


def test_the_autoencoder_is_judged_against_its_recorded_trivial_loss():
    trivial = [(0, "test", "trivial_loss", 0.09)]
    records = _run("ok", [0.05, 0.8], extra=trivial) + _run("bad", [0.05, 0.95], extra=trivial)
    assert diverged_runs(records, AUTOENCODER) == {"bad"}
    # without a recorded reference only the non-finite part applies
    assert diverged_runs(_run("old", [0.05, 1e6]), AUTOENCODER) == set()
    assert diverged_runs(_run("old", [0.05, math.nan]), AUTOENCODER) == {"old"}


def test_marking_turns_every_measurement_of_a_diverged_run_into_nan_and_keeps_bookkeeping():
    bad = _run("bad", [0.5, 1e27], extra=[(2, "test", "error", 0.9), (2, "train", "seconds", 3.0)])
    good = _run("good", [0.5, 0.4])
    marked = mark_diverged(bad + good, CLASSIFIER)
    by_run = {(r.run_id, r.epoch, r.metric): r.value for r in marked}
    assert math.isnan(by_run[("bad", 1, "loss")]) and math.isnan(by_run[("bad", 2, "error")])
    assert by_run[("bad", 2, "seconds")] == 3.0
    assert by_run[("good", 2, "loss")] == 0.4
    again = mark_diverged(marked, CLASSIFIER)
    assert [r.run_id for r in again] == [r.run_id for r in marked]
    assert all((a.value == b.value) or (math.isnan(a.value) and math.isnan(b.value))
               for a, b in zip(again, marked, strict=True))  # fmt: skip


def test_the_autoencoder_engine_records_the_trivial_loss_of_the_training_mean():
    import torch

    from gelus.experiments.engines.mlp.engine import trivial_losses

    class Split:
        def __init__(self, x):
            self.x = x

        def inputs(self, index):
            return self.x[index]

        def __len__(self):
            return len(self.x)

    generator = torch.Generator().manual_seed(0)
    train, test = (
        torch.rand(50, 2, 3, generator=generator),
        torch.rand(20, 2, 3, generator=generator),
    )
    data = type("Data", (), {"train": Split(train), "test": Split(test), "val": None})()
    config = type(
        "C", (), {"train": type("T", (), {"eval_batch_size": 7, "eval_train_subset": 0})()}
    )()
    losses = trivial_losses(data, config, torch.arange(50))
    mean = train.double().flatten(1).mean(dim=0)  # float64 oracle
    expected_test = float((test.double().flatten(1) - mean).square().mean())
    assert losses["test"] == pytest.approx(expected_test, rel=1e-12)
    assert losses["train"] == pytest.approx(
        float(train.double().flatten(1).var(dim=0, unbiased=False).mean()), rel=1e-12
    )
