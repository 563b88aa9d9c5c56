"""`gelus reproduce --plan`: each preset's work as the planner packs it, priced by timed steps."""

import math

import pytest
import torch

from gelus.cli import main as gelus_main
from gelus.experiments import PRESETS
from gelus.experiments.budget import budget_table, makespan, price, workload


@pytest.fixture(autouse=True)
def _private_price_cache(monkeypatch, tmp_path):
    """Calibrations go to a fresh cache per test: none is read from, or left in, the user's home."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_the_mnist_grid_is_120_runs_in_8_ensembles_of_15():
    w = workload(PRESETS["mnist-classification"])  # 4 activations × 2 dropout settings
    assert (w.engine, w.jobs, w.members, w.runs, w.epochs) == ("mlp", 8, 15, 120, 50)
    assert w.steps == 55_000 // 128
    assert w.eval_samples == 55_000 + 5_000 + 10_000  # train loss, validation, test every epoch


def test_cnn_presets_are_one_run_per_job_with_their_training_set():
    wrn = workload(PRESETS["cifar100-wrn"])
    assert wrn.engine == "cnn" and wrn.members == 1
    assert wrn.steps == 50_000 // 128 and wrn.epochs == 50  # the 50k default of the preset
    config = wrn.config
    assert wrn.jobs == len(config.activations) * len(config.optim.lr) * config.train.seeds


def test_quick_settings_shrink_the_work():
    full, quick = (workload(PRESETS["mnist-autoencoder"], q) for q in (False, True))
    assert quick.steps * quick.epochs * quick.runs < full.steps * full.epochs * full.runs
    assert quick.steps == 6_000 // quick.config.train.batch_size  # train.train_subset=6000


def test_makespan_deals_largest_first_to_the_least_loaded_device():
    assert makespan([5, 4, 3, 3, 3], 2) == 10  # LPT: 5 | 4, then 3 -> 7, 3 -> 8, 3 -> 10
    assert makespan([1, 1, 1, 1], 4) == 1
    assert makespan([7], 8) == 7
    jobs = [3.0, 9.0, 2.5, 4.0, 4.0, 1.0]
    for devices in (1, 2, 3):
        assert sum(jobs) / devices <= makespan(jobs, devices) <= sum(jobs) / devices + max(jobs)


def test_a_priced_preset_gives_finite_times_that_shrink_with_devices():
    cost = price(workload(PRESETS["twitter-pos"], quick=True), "cpu", repeats=1)
    assert 0 < cost.step_seconds < 10 and 0 < cost.eval_seconds_per_sample < 1
    work = cost.work
    per_epoch = work.steps * cost.step_seconds + work.eval_samples * cost.eval_seconds_per_sample
    assert math.isclose(cost.job_seconds, work.epochs * per_epoch)
    assert cost.seconds(3) <= cost.seconds(1)
    table = budget_table([cost], devices=(1, 3))
    assert "twitter-pos" in table and "whole paper" in table and "3 devices" in table


def test_cli_plan_prints_the_table_and_refuses_bad_counts(capsys):
    argv = ["reproduce", "--plan", "--quick", "--device", "cpu", "--experiments", "twitter-pos"]
    assert gelus_main([*argv, "--plan-devices", "1,2"]) == 0
    out = capsys.readouterr().out
    assert "twitter-pos" in out and "2 devices" in out
    assert gelus_main([*argv, "--plan-devices", "0"]) == 2
    assert "--plan-devices" in capsys.readouterr().err
    assert gelus_main(["reproduce", "--plan", "--experiments", "nope"]) == 2
    assert "valid experiments" in capsys.readouterr().err


def test_run_plan_prices_the_sweep_asked_for_one_row_per_config_of_its_axes(capsys):
    argv = ["run", "twitter-pos", "--quick", "--plan", "--device", "cpu", "--workers", "2"]
    assert gelus_main([*argv, "--seeds", "2", "--set", "optim.lr=1e-3,1e-2,1e-1"]) == 0
    one_lr = capsys.readouterr().out
    assert "whole sweep" in one_lr and "2 devices" in one_lr
    rows = [line.split() for line in one_lr.splitlines() if line.startswith("twitter-pos")]
    assert len(rows) == 1 and int(rows[0][1]) == 3 * 2 * len(
        PRESETS["twitter-pos"].config.activations
    )
    assert gelus_main([*argv, "--set", "train.batch_size=16,32"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("twitter-pos")]
    assert len(rows) == 2  # an axis: one config per value
    assert gelus_main([*argv, "--activations", "gelu", "nope"]) == 2
    assert "Valid names" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU-only machine")
def test_cli_plan_on_cuda_without_a_gpu_is_one_clear_error(capsys):
    assert gelus_main(["reproduce", "--plan", "--device", "cuda", "--experiments", "timit"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_a_calibration_is_cached_by_job_shape_code_and_machine(monkeypatch):
    from gelus.experiments import budget

    work = workload(PRESETS["twitter-pos"], quick=True)
    first, calibration = budget.cached_price(work, "cpu")
    assert not calibration["cached"] and calibration["load"] >= 0 and "UTC" in calibration["when"]
    monkeypatch.setattr(budget, "price", lambda *a, **k: pytest.fail("priced again"))
    again, calibration = budget.cached_price(work, "cpu")
    assert calibration["cached"] and again.step_seconds == first.step_seconds
    other = workload(PRESETS["twitter-pos"], quick=False)  # another config: its own calibration
    with pytest.raises(pytest.fail.Exception, match="priced again"):
        budget.cached_price(other, "cpu")


def test_a_cpu_calibration_times_a_smaller_step_and_scales_it_by_members_or_batch():
    from gelus.experiments.budget import _scaled_down

    timit = workload(PRESETS["timit"])
    smaller, factor = _scaled_down(timit)
    (job,) = smaller.planned
    assert len(job.members) == 2 and factor == timit.members / 2  # a stacked step ∝ its members
    wrn = workload(PRESETS["cifar100-wrn"])
    smaller, factor = _scaled_down(wrn)
    assert smaller.config.train.batch_size == 16 and factor == 128 / 16  # a CNN step ∝ its batch
    assert smaller.planned[0].config.train.batch_size == 16
    lm = workload(PRESETS["transformer-lm"])
    assert _scaled_down(lm) == (lm, 1.0)  # small enough to time as it is


def test_a_cpu_calibration_runs_one_thread_as_a_worker_does_and_restores_the_setting(
    monkeypatch, tmp_path
):
    from gelus.experiments import budget

    seen = []
    monkeypatch.setattr(budget, "_cache_path", lambda: tmp_path / "plan-prices.json")
    monkeypatch.setattr(
        budget, "price", lambda work, device, repeats: seen.append(torch.get_num_threads())
        or budget.Cost(work, device, 1.0, 1e-3),
    )  # fmt: skip
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _, calibration = budget.cached_price(workload(PRESETS["mnist-classification"]), "cpu")
        assert not calibration["cached"] and seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _quick_price(monkeypatch, seconds=0.25):
    """Pricing made instant, counting its calls: the cache, not the timing, is under test."""
    from gelus.experiments import budget

    calls = []
    monkeypatch.setattr(
        budget, "price", lambda work, device, repeats: calls.append(work.experiment)
        or budget.Cost(work, device, seconds, 1e-4),
    )  # fmt: skip
    return calls


def test_a_fifo_in_place_of_the_price_cache_does_not_hang_and_is_priced_again(
    monkeypatch, tmp_path, capsys
):
    import json
    import os
    import threading

    from gelus.experiments import budget

    calls = _quick_price(monkeypatch)
    cache = tmp_path / "cache" / "gelus" / "plan-prices.json"
    cache.parent.mkdir(parents=True)
    os.mkfifo(cache)
    codes = []
    argv = ["reproduce", "--plan", "--quick", "--experiments", "twitter-pos"]
    thread = threading.Thread(target=lambda: codes.append(gelus_main(argv)), daemon=True)
    thread.start()
    thread.join(timeout=60)
    if thread.is_alive():  # let the reader that hangs go before failing
        os.close(os.open(cache, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("a FIFO as the price cache hangs `gelus reproduce --plan`")
    assert codes == [0] and calls == ["twitter-pos"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a FIFO, not a price cache; priced again" in err
    assert cache.is_file() and json.loads(cache.read_text())  # replaced by a regular cache
    assert budget.cached_price(workload(PRESETS["twitter-pos"], quick=True))[1]["cached"]


def test_a_folder_in_place_of_the_price_cache_is_priced_again_and_left_alone(monkeypatch, tmp_path):
    from gelus.experiments import budget

    calls = _quick_price(monkeypatch)
    cache = tmp_path / "cache" / "gelus" / "plan-prices.json"
    (cache / "inside").mkdir(parents=True)
    work = workload(PRESETS["twitter-pos"], quick=True)
    for _ in range(2):
        cost, calibration = budget.cached_price(work)
        assert (
            not calibration["cached"] and "is a folder, not a price cache" in calibration["warning"]
        )
    assert cost.step_seconds == 0.25 and len(calls) == 2 and (cache / "inside").is_dir()


NESTED = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "stored",
    [
        {"step": "fast", "eval": 1e-4, "load": 0.5},
        {"step": [1.0], "eval": 1e-4, "load": 0.5},
        {"step": -830.0, "eval": 1e-4, "load": 0.5},  # printed a plan of −830 min
        {"step": 0.25, "eval": float("nan"), "load": 0.5},
        {"step": True, "eval": 1e-4, "load": 0.5},
        {"step": 10**400, "eval": 1e-4, "load": 0.5},
        {"step": 0.25, "eval": 1e-4, "load": "high"},
        {"step": 0.25, "eval": 1e-4, "load": 0.5, "when": ["today"]},
        {"step": 0.25, "eval": 1e-4},
        "0.25",
        NESTED,
    ],
    ids=[
        "text",
        "list",
        "negative",
        "nan",
        "bool",
        "huge",
        "text-load",
        "list-when",
        "no-load",
        "not-an-object",
        "nested-too-deep",
    ],
)
def test_a_cached_price_that_is_not_valid_is_priced_again_with_one_warning(
    monkeypatch, tmp_path, capsys, stored
):
    import json

    from gelus.experiments import budget

    calls = _quick_price(monkeypatch)
    work = workload(PRESETS["twitter-pos"], quick=True)
    cache = tmp_path / "cache" / "gelus" / "plan-prices.json"
    cache.parent.mkdir(parents=True)
    text = (
        NESTED if stored is NESTED else json.dumps({budget._calibration_key(work, "cpu"): stored})
    )
    cache.write_text(text)
    argv = ["reproduce", "--plan", "--quick", "--experiments", "twitter-pos"]
    assert gelus_main(argv) == 0 and calls == ["twitter-pos"]
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("gelus reproduce: warning: ")
    assert "priced again" in err and " -" not in out.splitlines()[1]  # no negative minutes
    cost, calibration = budget.cached_price(work)  # the cache now holds a valid price
    assert calibration["cached"] and cost.step_seconds == 0.25 and calls == ["twitter-pos"]


def test_an_absurd_device_count_is_clamped_to_the_jobs(capsys):
    """More devices than jobs leave the extra ones idle: the plan is the one of a device per job,
    priced at once, not a list of 10^11 idle devices ("out of memory")."""
    assert makespan([5, 4, 3], 99_999_999_999) == 5 == makespan([5, 4, 3], 3)
    argv = ["reproduce", "--plan", "--quick", "--device", "cpu", "--experiments", "twitter-pos"]
    assert gelus_main([*argv, "--plan-devices", "1,99999999999"]) == 0
    captured = capsys.readouterr()
    assert "99999999999 devices" in captured.out and "error" not in captured.err
