"""`gelus report` and `gelus reproduce` end to end, with a fake engine writing synthetic records."""

import matplotlib

matplotlib.use("Agg")

import pytest

from gelus.cli import main
from gelus.experiments import cli as experiments_cli
from gelus.experiments.presets import PRESETS
from gelus.report import sources
from gelus.report.render import unwrapped
from test_synthetic import make_records, write_database


def test_report_command_writes_html_and_markdown(tmp_path, capsys):
    records, runs = make_records(epochs=2, settings=("keep=1.0",), lrs=(1e-3,))
    write_database(tmp_path / "run", records, runs)
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep")]) == 0
    assert "report.html" in capsys.readouterr().out
    md = unwrapped((tmp_path / "rep" / "report.md").read_text())
    assert "## mnist-classification (paper Figure 2)" in md
    # presets with no records are listed with how to get (or run) them, not dropped
    assert "## Experiments without data" in md and "| timit | timit |" in md


def test_report_command_errors_name_the_way_out(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "no records.sqlite" in capsys.readouterr().err
    write_database(tmp_path / "empty", [], [])
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "holds no records yet" in capsys.readouterr().err


@pytest.fixture
def fake_engine(monkeypatch):
    """Two presets: one runs (writes synthetic records), one has no data."""
    presets = {name: PRESETS[name] for name in ("mnist-classification", "cifar10-allconv")}
    calls = []

    def run_with_progress(options, executor=None):
        name, quick = options.experiment, options.quick
        assert options.device == "auto"
        calls.append((name, quick, options.workers) if executor is None else (name, executor))
        records, runs = make_records(
            name, epochs=2, settings=("keep=1.0",), lrs=(1e-3,), quick=quick
        )
        write_database(options.out_dir, records, runs)
        return options.out_dir

    def dataset_status(name, data_dir=None):
        present = name == "fashion-mnist"
        return sources.DatasetStatus(name, present, f"how to get {name}: fetch it")

    monkeypatch.setattr(sources, "presets", lambda: presets)
    monkeypatch.setattr(experiments_cli, "run_with_progress", run_with_progress)
    monkeypatch.setattr(sources, "dataset_status", dataset_status)
    return calls


def test_reproduce_runs_what_it_can_and_lists_the_rest(tmp_path, fake_engine, capsys):
    out = tmp_path / "quick"
    assert main(["reproduce", "--quick", "--out", str(out), "--workers", "1"]) == 0
    assert fake_engine == [("mnist-classification", True, 1)]  # cifar10 data absent: not run
    md = unwrapped((out / "report" / "report.md").read_text())
    assert "> **Quick run:" in md
    assert "The paper reports: " + PRESETS["mnist-classification"].paper_summary in md
    assert "| cifar10-allconv | cifar10 | how to get cifar10: fetch it |" in md
    assert (out / "report" / "report.html").is_file()


def test_reproduce_without_any_data_is_a_user_error(tmp_path, fake_engine, monkeypatch, capsys):
    monkeypatch.setattr(sources, "dataset_status", lambda name, data_dir=None: sources.DatasetStatus(name, False, "x"))  # fmt: skip
    assert main(["reproduce", "--out", str(tmp_path / "full")]) == 2
    assert "no experiment could run" in capsys.readouterr().err
    assert fake_engine == []


def test_reproduce_hands_its_executor_to_every_run_and_shuts_it_down(
    tmp_path, fake_engine, monkeypatch
):
    import gelus.report.cli as report_cli

    class Executor:
        shut = False

        def shutdown(self):
            self.shut = True

    executor = Executor()
    chosen = []

    def make_executor(args):
        chosen.append((args.executor, args.address, args.max_retries, args.threads))
        return executor

    monkeypatch.setattr(report_cli, "make_executor", make_executor)
    argv = ["reproduce", "--quick", "--out", str(tmp_path / "q"), "--executor", "ray"]
    assert main([*argv, "--address", "auto", "--max-retries", "5"]) == 0
    assert chosen == [("ray", "auto", 5, 1)]
    assert fake_engine == [("mnist-classification", executor)]
    assert executor.shut


def test_reproduce_address_without_ray_is_a_user_error(tmp_path, fake_engine, capsys):
    assert main(["reproduce", "--out", str(tmp_path / "q"), "--address", "auto"]) == 2
    assert "--address needs --executor ray" in capsys.readouterr().err
    assert fake_engine == []


def test_report_select_rule_changes_the_protocol_and_verdicts_say_when_rules_disagree(tmp_path):
    from gelus.report.analysis import analyse

    records, runs = make_records(seeds=(0, 1, 2, 3, 4))
    write_database(tmp_path, records, runs)
    assert main(["report", str(tmp_path), "--select", "val-error-best"]) == 0
    md = unwrapped((tmp_path / "report" / "report.md").read_text())
    assert "chosen at the lowest median val error at each seed's best epoch" in md
    (default,) = analyse(records, runs, PRESETS)
    (by_error,) = analyse(records, runs, PRESETS, "val-error-last")
    assert "val loss" in default.rules[0] and "val error" in by_error.rules[0]
    # every comparison was recomputed under each rule: a disagreement names each rule's verdict
    for comparison, _ in default.comparisons:
        assert comparison.depends == "" or "val-loss-last" in comparison.depends


def test_a_run_off_the_papers_settings_gets_the_banner_with_its_values(tmp_path):
    from gelus.report.analysis import analyse

    records, runs = make_records()
    (result,) = analyse(records, runs, PRESETS)
    assert "train.epochs=4 (the paper's: 50)" in result.departures  # these runs took 4 epochs
    write_database(tmp_path, records, runs)
    assert main(["report", str(tmp_path)]) == 0
    md = unwrapped((tmp_path / "report" / "report.md").read_text())
    assert ("Not the paper's settings" in md) == bool(result.departures)


@pytest.mark.parametrize("experiment", ["mnist-classification", "mnist-noise"])
def test_the_report_never_crashes_on_nan_inf_or_huge_values(experiment, tmp_path):
    import math

    extra = (
        {"settings": ("keep=1.0",), "noise_levels": (0.0, 1.0, 2.0)}
        if "noise" in experiment
        else {}
    )
    records, runs = make_records(experiment, seeds=(0, 1, 2), **extra)
    poisoned = {
        ("relu", 0): math.nan,
        ("elu", 1): math.inf,
        ("gelu", 2): 1e27,
        ("elu", 2): -math.inf,
    }
    records = [
        r._replace(value=poisoned.get((r.activation, r.seed), r.value)) if r.epoch >= 1 else r
        for r in records
    ]
    write_database(tmp_path, records, runs)
    assert main(["report", str(tmp_path)]) == 0
    md = unwrapped((tmp_path / "report" / "report.md").read_text())
    assert "diverged" in md
