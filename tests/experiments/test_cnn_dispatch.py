"""CNN presets go through the same jobs, records and resume as the MLPs (tiny WRN on fake CIFAR)."""

import torch

from gelus.data import Dataset, TensorSplit
from gelus.experiments import datasets, plan, read_records, read_runs, sweep
from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.records import RecordStore
from gelus.experiments.run import resolve_config

TINY_WRN = [
    "cnn.blocks_per_stage=1",
    "cnn.widths=4,4,8,8",
    "train.batch_size=16",
    "cnn.retrain_full=false",
    "cnn.train_eval_size=32",
    "cnn.eval_batch_size=64",
]


def _fake_cifar100(*args, **kwargs) -> Dataset:
    gen = torch.Generator().manual_seed(0)
    images = lambda n: torch.randint(0, 256, (n, 3, 32, 32), generator=gen, dtype=torch.uint8)  # noqa: E731
    labels = lambda n: torch.randint(0, 100, (n,), generator=gen)  # noqa: E731
    return Dataset(
        "cifar100",
        TensorSplit(images(64), labels(64)),
        TensorSplit(images(32), labels(32)),
        TensorSplit(images(32), labels(32)),
        100,
        "fake",
    )


def test_cnn_jobs_record_every_epoch_and_finish(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", _fake_cifar100)
    _, config, _ = resolve_config(
        "cifar100-wrn", activations=["gelu"], seeds=1, epochs=2, overrides=TINY_WRN
    )
    assert config.train.epochs == 2 and config.model.approximate == "tanh"
    assert config.train.batch_size == 16 and not config.cnn.retrain_full
    jobs = plan.plan_jobs(
        "cifar100-wrn",
        config,
        resolve_activations(config.activations, config.model.approximate),
        train_size=1000,
        out_dir=tmp_path,
        data_dir=None,
        verify=False,
        metadata={},
        done=set(),
    )
    assert [job.engine for job in jobs] == ["cnn"] and jobs[0].members[0].lr == 0.1
    reports = []
    sweep.LocalExecutor(workers=0).run(jobs, lambda *report: reports.append(report))
    (run,) = read_runs(tmp_path)
    assert run.status == "done" and run.activation == "gelu" and run.setting == ""
    records = read_records(tmp_path)
    assert {r.epoch for r in records} == {1, 2}
    assert {(r.split, r.metric) for r in records} >= {
        ("train", "loss"),
        ("val", "error"),
        ("test", "error"),
        ("train", "seconds"),
    }
    assert reports[-1][2:] == (2, 2)
    # done runs are not planned again
    store = RecordStore(tmp_path)
    assert (
        plan.plan_jobs(
            "cifar100-wrn",
            config,
            resolve_activations(config.activations, config.model.approximate),
            train_size=1000,
            out_dir=tmp_path,
            data_dir=None,
            verify=False,
            metadata={},
            done=store.done_run_ids(),
        )
        == []
    )
    store.close()
