"""Each activation's time per step: measured interleaved after a transformer sweep, stored beside
its records once, and shown by the report as a table and a curve against training time."""

import sqlite3
from pathlib import Path

import pytest
import torch

from gelus.data.text import load_text_file
from gelus.experiments import PRESETS, read_records, read_runs
from gelus.experiments.activation_spec import resolve_activations
from gelus.experiments.config import apply_overrides, validate
from gelus.experiments.engines.transformer.config import TransformerExperimentConfig
from gelus.experiments.records import RecordStore, read_step_times
from gelus.experiments.runner import run_experiment
from gelus.experiments.step_times import measure_step_times
from text_corpus import write_corpus

TINY = (
    "model.d_model=16", "model.layers=1", "model.heads=2", "model.context=16",
    "train.epochs=2", "train.steps_per_epoch=2", "train.batch_size=4",
    "train.eval_bytes=1024",
)  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"))


def test_every_activation_gets_one_positive_time_per_round_at_one_thread(corpus, monkeypatch):
    config = apply_overrides(TransformerExperimentConfig(), list(TINY))
    validate(config)
    seen_threads = []
    from gelus.experiments import step_times
    from gelus.experiments.engines.transformer import engine as transformer

    original = transformer.TransformerEngine.train_epoch

    def spy(self, epoch):
        seen_threads.append((torch.get_num_threads(), self.steps))
        return original(self, epoch)

    monkeypatch.setattr(transformer.TransformerEngine, "train_epoch", spy)
    monkeypatch.setattr(step_times, "MIN_ROUND_SECONDS", 0.0)  # one epoch per round
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        data = load_text_file(corpus / "text" / "corpus.txt")
        specs = resolve_activations(["gelu", "relu", "swiglu"])
        times = measure_step_times("transformer-lm", config, specs, data, rounds=3, steps=2)
        assert torch.get_num_threads() == 2  # the caller's setting is restored
    finally:
        torch.set_num_threads(before)
    assert set(times) == {"gelu", "relu", "swiglu"}
    assert all(len(rounds) == 3 and all(t > 0 for t in rounds) for rounds in times.values())
    # a warm-up epoch per activation, then 3 timed rounds; each at one thread, of `steps` steps
    assert seen_threads == [(1, 2)] * (3 + 3 * 3)
    with pytest.raises(ValueError, match="rounds=0"):
        measure_step_times("transformer-lm", config, specs, data, rounds=0)


def test_a_stacked_sweep_is_timed_as_its_whole_job_per_run_step(corpus, monkeypatch):
    from gelus.experiments import step_times, timing
    from gelus.experiments.engines.transformer import stacked as transformer_stacked

    config = apply_overrides(
        TransformerExperimentConfig(),
        [*TINY, "train.stack=on", "train.seeds=2", "optim.lr=1e-3,2e-3"],
    )
    validate(config)
    members = []
    original = transformer_stacked.StackedTransformerEngine.train_epoch

    def spy(self, epoch):
        members.append(len(self.members))
        return original(self, epoch)

    monkeypatch.setattr(transformer_stacked.StackedTransformerEngine, "train_epoch", spy)
    clock = iter(range(10_000))  # each perf_counter() call advances 1 s
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(step_times, "MIN_ROUND_SECONDS", 0.0)
    data = load_text_file(corpus / "text" / "corpus.txt")
    times = measure_step_times(
        "transformer-lm", config, resolve_activations(["gelu"]), data, rounds=2, steps=4
    )
    assert set(members) == {4}  # 2 seeds × 2 lrs in one stacked job
    assert times == {"gelu": [1 / 4 / 4, 1 / 4 / 4]}  # 1 s a round, over 4 steps and 4 runs


def test_a_round_repeats_a_short_epoch_until_it_lasts_the_minimum(monkeypatch):
    from gelus.experiments import step_times, timing

    clock = iter(range(10_000))  # each perf_counter() call advances 1 s; an epoch costs 1 s
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(step_times, "MIN_ROUND_SECONDS", 3.0)
    calls = {"a": 0, "b": 0}

    def epoch(label):
        return lambda: calls.__setitem__(label, calls[label] + 1)

    times = step_times._interleaved({"a": epoch("a"), "b": epoch("b")}, rounds=2, steps=4)
    assert calls == {"a": 1 + 2 * 3, "b": 1 + 2 * 3}  # the warm-up, then 3 epochs a round
    # a round's clock reads 1 s apart around its 3 epochs: 1 s over 3 × 4 steps
    assert times == {"a": [1 / 12, 1 / 12], "b": [1 / 12, 1 / 12]}


def test_a_sweep_stores_its_step_times_once_and_the_report_prices_its_curves(corpus, tmp_path):
    from gelus.report.render import unwrapped, write_report

    kwargs = dict(
        out_dir=tmp_path / "out", activations=["gelu", "relu"], seeds=1, overrides=TINY,
        quick=True, workers=0, data_dir=corpus, dataset="text", verify=False,
    )  # fmt: skip
    out = run_experiment("transformer-lm", **kwargs)
    times = read_step_times(out)
    (config_hash,) = {r.config_hash for r in read_runs(out)}
    assert {(t.experiment, t.config_hash, t.device, t.threads) for t in times} == {
        ("transformer-lm", config_hash, "cpu", 1)
    }
    assert sorted({t.activation for t in times}) == ["gelu", "relu"]
    assert len(times) == 2 * 5 and all(t.seconds > 0 for t in times)

    with sqlite3.connect(out / "records.sqlite") as db:  # mark them, to see a rerun keep them
        db.execute("UPDATE step_times SET seconds = 0.125")
    run_experiment("transformer-lm", **kwargs)  # resumed: every run done, every time stored
    assert {t.seconds for t in read_step_times(out)} == {0.125}

    _, md = write_report(
        read_records(out), read_runs(out), tmp_path / "report", presets=PRESETS,
        activation_figure=False, step_times=read_step_times(out),
    )  # fmt: skip
    text = unwrapped(Path(md).read_text(encoding="utf-8"))  # tables as pipe tables
    assert "### Time per step" in text
    assert "| gelu | cpu, 1 thread | 125.0 | 125.0 – 125.0 | 5 | 1.000× |" in text
    assert "against training time" in text and "transformer-lm-time.png" in text
    assert "| aspect | preset | this run |" in text  # beyond the paper: no "paper" column
    assert "Test results: paper vs ours" not in text and "Background: Not in the paper" in text
    setup = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert "d 16, 1 layers, 2 heads, context 16, layernorm, no biases" in setup["| model"]
    assert "8 windows of 17 bytes per epoch" in setup["| training set"]
    optimizer = "AdamW β 0.9 / 0.95, weight decay 0.1 on matrices, warmup 5 % then cosine to 10 %"
    assert optimizer in setup["| optimizer"]
    assert setup["| GELU form"].endswith("| exact |")
    from gelus.report.analysis import _departures

    departures = _departures(PRESETS["transformer-lm"], read_runs(out))
    assert departures and all("(the preset's: " in d for d in departures)


def test_without_step_times_the_report_draws_the_sweeps_own_clock(corpus, tmp_path):
    from gelus.report.analysis import analyse
    from gelus.report.figures import experiment_figures

    out = run_experiment(
        "transformer-lm", out_dir=tmp_path / "out", activations=["gelu"], seeds=2,
        overrides=TINY, quick=True, workers=0, data_dir=corpus, dataset="text",
        verify=False, step_times=False,
    )  # fmt: skip
    assert read_step_times(out) == []
    records, runs = read_records(out), read_runs(out)
    (result,) = analyse(records, runs, PRESETS)
    assert result.step_costs == () and dict(result.steps_per_epoch) == {runs[0].config_hash: 2}
    selections = [row.selection for row in result.rows]
    figures = experiment_figures(
        records, selections, result.figure, title="t",
        steps_per_epoch=dict(result.steps_per_epoch),
    )  # fmt: skip
    assert figures["curves"].axes[0].get_xlabel() == "epoch (2 steps each)"
    ax = figures["time"].axes[0]
    assert "sweep" in ax.get_xlabel()
    seconds = sorted(r.value for r in records if r.metric == "seconds" and r.epoch == 2)
    assert seconds[0] <= ax.lines[0].get_xdata()[-1] <= seconds[-1]  # the median over seeds


def test_records_without_the_step_times_table_read_as_none(tmp_path):
    store = RecordStore(tmp_path)
    store.close()
    with sqlite3.connect(tmp_path / "records.sqlite") as db:  # as a database of an older gelus
        db.execute("DROP TABLE step_times")
    assert read_step_times(tmp_path) == []
    store = RecordStore(tmp_path)  # a writer adds the table
    store.add_step_times("e", "h", "cpu", 1, {"gelu": [0.5, 0.25]})
    store.add_step_times("e", "h", "cpu", 1, {"gelu": [0.75]})  # a re-measurement replaces
    assert store.timed_activations("e", "h", "cpu") == {"gelu"}
    assert store.timed_activations("e", "h", "cuda") == set()
    store.close()
    assert [(t.activation, t.round, t.seconds) for t in read_step_times(tmp_path)] == [
        ("gelu", 0, 0.75)
    ]
