"""The harness under faults, round four: user activation code that fails after its probe, sizes
beyond the machine, a context longer than the corpus, damaged records in the run's summary.

Each ends in one line in the command line's form (no traceback) with exit status 1 or 2; a job
that failed leaves its runs ``failed`` (never ``running``), the next run tries them again, and
nothing already finished is lost (the records equal an uninterrupted run's)."""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from gelus.cli import main
from gelus.experiments import read_records, read_runs
from test_cli_errors import _argv, _error, _gelus
from test_run import write_tiny_mnist
from text_corpus import write_corpus

# A user's activation: GELU, until the file that FAIL_FILE names exists; then, while training
# (gradients on), it fails as FAIL_HOW says. HANG_FILE: it writes that file and sleeps (a hang).
USER_CODE = """
    import os, sys, time
    import torch

    def act(x):
        if os.environ.get("HANG_FILE"):
            open(os.environ["HANG_FILE"], "w").close()
            time.sleep(120)
        if torch.is_grad_enabled() and os.path.exists(os.environ.get("FAIL_FILE", "/nonexistent")):
            how = os.environ["FAIL_HOW"]
            if how.startswith("exit"):
                sys.exit(int(how[4:]))
            raise ValueError("the user's bug")
        return torch.nn.functional.gelu(x)

    def branches(x):
        if x.sum() > 0:  # data-dependent control flow: no stacked (vmapped) training can take it
            return x
        return -x

    def to_float64(x):
        return x.double()

    def to_int64(x):
        return x.long()
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "mnist", n_train=5_200, n_test=100)
    write_corpus(root)
    return root


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    """``acts.py`` in the current directory (as a user's module is), and the FAIL_FILE to create."""
    (tmp_path / "acts.py").write_text(textwrap.dedent(USER_CODE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("FAIL_FILE", str(tmp_path / "fail-now"))
    yield tmp_path / "fail-now"
    sys.modules.pop("acts", None)


def _values(out):
    return {
        (r.run_id, r.epoch, r.split, r.metric): r.value
        for r in read_records(out)
        if r.metric != "seconds"
    }


def _one_line(err: str) -> str:
    message = err.rpartition("gelus run: error: ")[2]
    assert message and message.count("\n") == 1, err
    return message


@pytest.mark.parametrize("how", ["exit0", "exit3", "raise"])
def test_user_code_failing_in_training_is_one_line_its_runs_failed_then_retried(
    how, data_dir, user_code, tmp_path, monkeypatch, capsys
):
    """In this process: the first epoch trains, then the activation fails in the second; before,
    sys.exit(0) made `gelus run` exit 0 silently with its run left `running`."""
    from gelus.experiments import driver

    argv = _argv(data_dir, tmp_path / "out", epochs=2)
    argv[argv.index("gelu")] = "acts:act"
    clean = tmp_path / "clean"
    real_save = driver.save_checkpoint

    def save_then_break(path, state):
        real_save(path, state)
        user_code.touch()  # the activation fails from here on (epoch 2)

    monkeypatch.setenv("FAIL_HOW", how)
    with monkeypatch.context() as patch:
        patch.setattr(driver, "save_checkpoint", save_then_break)
        status = main(argv)
    err = _one_line(_error(capsys))
    assert status == 2
    assert "'acts:act'" in err and "training epoch 2" in err
    assert (
        "SystemExit(" + how[4:] + ")" if how != "raise" else "ValueError: the user's bug"
    ) in err
    assert {run.status for run in read_runs(tmp_path / "out")} == {"failed"}
    assert {r.epoch for r in read_records(tmp_path / "out")} == {0, 1}  # epoch 1 is kept

    user_code.unlink()  # the same code, no longer failing: the next run retries the failed runs
    assert main(argv) == 0
    assert {run.status for run in read_runs(tmp_path / "out")} == {"done"}
    clean_argv = list(argv)
    clean_argv[clean_argv.index("--out") + 1] = str(clean)
    assert main(clean_argv) == 0
    assert _values(tmp_path / "out") == _values(clean)


def test_user_code_exiting_in_a_worker_is_one_line_not_a_silent_success(
    data_dir, user_code, tmp_path
):
    """In a worker process, through the command line: sys.exit(0) in training used to end
    `gelus run` with status 0, no output, and the run left `running`."""
    user_code.touch()
    argv = _argv(data_dir, tmp_path / "out", workers=1)
    argv[argv.index("gelu")] = "acts:act"
    done = _gelus(argv, cwd=tmp_path, env={"FAIL_HOW": "exit0", "FAIL_FILE": str(user_code)})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    err = _one_line(done.stderr)
    assert "'acts:act'" in err and "training epoch 1" in err and "SystemExit(0)" in err
    assert {run.status for run in read_runs(tmp_path / "out")} == {"failed"}


def test_data_dependent_control_flow_under_stacking_names_the_activation(
    data_dir, user_code, tmp_path, capsys
):
    """train.stack=on trains the runs as one vmapped model: a branch on a tensor's value cannot
    run there; before, a 70-line traceback from torch that never named the activation."""
    argv = _lm_argv(data_dir, tmp_path / "out", "acts:branches", "train.stack=on", "train.seeds=2")
    assert main(argv) == 2
    err = _one_line(_error(capsys))
    assert "'acts:branches'" in err and "training epoch 1" in err and "data-dependent" in err
    assert {run.status for run in read_runs(tmp_path / "out")} == {"failed"}


@pytest.mark.parametrize("attribute", ["to_float64", "to_int64"])
def test_an_activation_returning_another_dtype_is_refused_at_its_probe(
    attribute, data_dir, user_code, tmp_path, capsys
):
    argv = _argv(data_dir, tmp_path / "out")
    argv[argv.index("gelu")] = f"acts:{attribute}"
    assert main(argv) == 2
    err = _one_line(_error(capsys))
    dtype = "torch.float64" if attribute == "to_float64" else "torch.int64"
    assert f"'acts:{attribute}'" in err and f"torch.float32 tensor to a {dtype}" in err
    assert not (tmp_path / "out" / "records.sqlite").exists()


def test_ctrl_c_while_user_code_hangs_in_the_probe_is_an_interruption(
    data_dir, user_code, tmp_path
):
    """Before: reported as the activation's failure, status 2."""
    hang = tmp_path / "hanging"
    argv = _argv(data_dir, tmp_path / "out")
    argv[argv.index("gelu")] = "acts:act"
    env = {**os.environ, "PYTHONPATH": str(_src()), "HANG_FILE": str(hang)}
    process = subprocess.Popen(
        [sys.executable, "-m", "gelus", *argv],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip  (a terminal's SIGINT: a background test run inherits it ignored)
    deadline = time.monotonic() + 120
    while not hang.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert hang.exists(), "the probe never called the activation"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err and "failed" not in err


def _src():
    from test_cli_errors import SRC

    return SRC


def _lm_argv(data_dir, out, activation="gelu", *settings):
    argv = ["run", "transformer-lm", "--dataset", str(data_dir / "text" / "corpus.txt"),
            "--activations", activation, "--workers", "0", "--out", str(out), "--no-step-times"]  # fmt: skip
    for setting in ("model.d_model=16", "model.layers=1", "model.heads=2", "model.context=16",
                    "train.epochs=1", "train.steps_per_epoch=2", "train.seeds=1", "optim.lr=1e-3",
                    *settings):  # fmt: skip
        argv += ["--set", setting]
    return argv


@pytest.mark.parametrize(
    ("experiment", "setting", "named"),
    [
        ("transformer-lm", "model.layers=100000000", "model.layers=100000000"),
        ("transformer-lm", "train.batch_size=1000000000", "train.batch_size=1000000000"),
        ("transformer-vit", "model.d_model=1000000", "model.d_model=1000000"),
        ("mnist-classification", "model.hidden=10000000,10000000", "model.hidden=10000000"),
    ],
)
def test_a_size_beyond_the_machines_memory_is_refused_before_anything_is_built(
    experiment, setting, named, data_dir, tmp_path, capsys
):
    """Before: model.layers=1000000 ran 91 s silently, the others ended in allocation tracebacks."""
    if experiment == "transformer-lm":
        argv = _lm_argv(data_dir, tmp_path / "out", "gelu", setting)
    else:
        argv = ["run", experiment, "--activations", "gelu", "--workers", "0", "--out",
                str(tmp_path / "out"), "--data-dir", str(data_dir), "--set", setting]  # fmt: skip
        argv += ["--set", "model.heads=1"] if experiment == "transformer-vit" else []
    began = time.perf_counter()
    assert main(argv) == 2
    err = _one_line(_error(capsys))
    assert "more than this machine's memory" in err and named in err and "lower them" in err
    assert re.search(r"by [\d.,]+ [kMGTP]B \([\d.,]+×\)", err), err  # by how much it exceeds
    assert time.perf_counter() - began < 20
    assert not (tmp_path / "out" / "records.sqlite").exists()


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("train.eval_bytes=3", "train.eval_bytes"),  # less than one window: crashed evaluation
        ("model.heads=0", "model.heads: invalid value; expected at least 1"),
        ("model.d_model=0", "model.d_model: invalid value; expected at least 1"),
    ],
)
def test_sizes_are_checked_in_order_before_any_job(setting, words, data_dir, tmp_path, capsys):
    assert main(_lm_argv(data_dir, tmp_path / "out", "gelu", setting)) == 2
    err = _one_line(_error(capsys))
    assert words in err
    assert not (tmp_path / "out" / "records.sqlite").exists()


@pytest.mark.parametrize(
    ("error", "phase"),
    [
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:127] . DefaultCPUAllocator: can't allocate "
                "memory: you tried to allocate 136000000000 bytes."
            ),
            "training epoch 2",
        ),
        (MemoryError(), "training epoch 2"),
    ],
    ids=["cpu allocator", "MemoryError"],
)
def test_an_allocation_that_still_fails_names_the_settings_and_keeps_what_finished(
    error, phase, data_dir, tmp_path, monkeypatch, capsys
):
    from gelus.experiments.engines.mlp.engine import MLPEngine

    argv = _argv(data_dir, tmp_path / "out", epochs=2)
    real = MLPEngine.train_epoch

    def fails_in_epoch_2(self, epoch):
        if epoch == 2:
            raise error
        return real(self, epoch)

    with monkeypatch.context() as patch:
        patch.setattr(MLPEngine, "train_epoch", fails_in_epoch_2)
        assert main(argv) == 1
    err = _one_line(_error(capsys))
    assert err.startswith(f"out of memory during {phase}")
    assert "it grows with" in err and "model.hidden=16,16" in err and "--workers" in err
    assert {run.status for run in read_runs(tmp_path / "out")} == {"failed"}
    assert main(argv) == 0  # tried again: resumed from epoch 1's checkpoint
    clean = list(argv)
    clean[clean.index("--out") + 1] = str(tmp_path / "clean")
    assert main(clean) == 0
    assert _values(tmp_path / "out") == _values(tmp_path / "clean")


def test_a_context_longer_than_the_corpus_names_the_setting_not_the_file(
    data_dir, tmp_path, capsys
):
    """Before: a right first line, then "Replace the file named above with a good copy"."""
    argv = _lm_argv(data_dir, tmp_path / "out", "gelu", "model.context=600")
    argv[argv.index("--dataset") + 1] = "text"
    argv += ["--data-dir", str(data_dir), "--no-verify"]
    assert main(argv) == 2
    err = _one_line(_error(capsys))
    assert "model.context=600 is too long" in err and "set model.context to" in err
    assert "Replace" not in err


def test_the_runs_summary_leaves_out_damaged_records_with_a_warning(data_dir, tmp_path, capsys):
    """A text value and a NULL epoch in records.sqlite: the report leaves their runs out with a
    warning; `gelus run`'s own summary (a resumed run with nothing left to do) now does too."""
    argv = _argv(data_dir, tmp_path / "out", "--seeds", "3")
    assert main(argv) == 0
    runs = sorted(run.run_id for run in read_runs(tmp_path / "out"))
    with sqlite3.connect(tmp_path / "out" / "records.sqlite") as connection:
        connection.execute("UPDATE records SET value = 'oops' WHERE run_id = ?", (runs[0],))
        connection.execute(
            "UPDATE records SET epoch = NULL WHERE run_id = ? AND epoch = 1", (runs[1],)
        )
    connection.close()
    capsys.readouterr()
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert f"warning: run {runs[0]} left out" in captured.err and "'oops'" in captured.err
    assert f"warning: run {runs[1]} left out" in captured.err and "epoch is NULL" in captured.err
    assert "median" in captured.out and "  1  " in captured.out  # the one run left
