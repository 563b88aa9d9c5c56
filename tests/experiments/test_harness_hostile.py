"""The harness under faults, round five (issue 46): user code judged by what it did, wherever it
is defined and wherever it runs; a process that user code ends; sizes bounded; the command line.

Each ends in one line in the command line's form (no traceback) with the documented exit status
(2: what the user asked or wrote; 1: the machine); a job that failed leaves its runs ``failed``
(never ``running``), and what finished is kept."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gelus.cli import main
from gelus.experiments import read_records, read_runs
from test_cli_errors import SRC, _argv, _error, _gelus
from test_run import write_tiny_mnist
from text_corpus import write_corpus

# The activation named on the command line lives in acts.py; some of them call code in helper.py
# (another module than the one named). Each misbehaves only while training (gradients on), after
# the probe, which they pass.
HELPER = """
    import torch

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.tanh(x)

        @staticmethod
        def backward(ctx, grad):
            raise ArithmeticError("the helper's backward")

    def fails(x):
        raise LookupError("the helper's bug")
"""
USER_CODE = """
    import os, sys
    import torch
    import helper

    def training():
        return torch.is_grad_enabled()

    def to_meta(x):
        return x.to("meta") if training() else torch.tanh(x)

    def to_none(x):
        return None if training() else torch.tanh(x)

    def float64_in_training(x):
        return torch.tanh(x).double() if training() else torch.tanh(x)

    def reshapes(x):
        return torch.tanh(x).flatten() if training() else torch.tanh(x)

    def elsewhere(x):
        return helper.fails(x) if training() else torch.tanh(x)

    def backward_elsewhere(x):
        return helper.Backward.apply(x)

    def no_memory(x):
        if training():
            raise MemoryError("the user's own")
        return torch.tanh(x)

    def exits(x):
        if training():
            os._exit(int(os.environ.get("EXIT_CODE", "0")))
        return torch.tanh(x)

    def exits_in_probe(x):
        os._exit(0)
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_tiny_mnist(root / "mnist", n_train=5_200, n_test=100)
    write_corpus(root)
    return root


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    """``acts.py`` and ``helper.py`` in the current directory, as a user's modules are."""
    (tmp_path / "acts.py").write_text(textwrap.dedent(USER_CODE))
    (tmp_path / "helper.py").write_text(textwrap.dedent(HELPER))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    yield tmp_path
    for name in ("acts", "helper"):
        sys.modules.pop(name, None)


def _one_line(err: str, command: str = "run") -> str:
    assert "Traceback" not in err, err[-3000:]
    message = err.rpartition(f"gelus {command}: error: ")[2]
    assert message and message.count("\n") == 1, err[-3000:]
    return message


def _lm_argv(data_dir, out, activation, *settings, workers=0):
    argv = ["run", "transformer-lm", "--dataset", str(data_dir / "text" / "corpus.txt"),
            "--activations", activation, "--workers", str(workers), "--out", str(out),
            "--no-step-times"]  # fmt: skip
    for setting in ("model.d_model=16", "model.layers=1", "model.heads=2", "model.context=16",
                    "train.epochs=1", "train.steps_per_epoch=2", "train.seeds=1", "optim.lr=1e-3",
                    *settings):  # fmt: skip
        argv += ["--set", setting]
    return argv


@pytest.mark.parametrize(
    ("attribute", "engine", "said"),
    [
        ("to_meta", "mlp", "returned a tensor on the meta device for an input on cpu"),
        ("to_none", "mlp", "returned None, not a tensor"),
        ("float64_in_training", "mlp", "returned a torch.float64 tensor for a torch.float32"),
        ("reshapes", "mlp", "returned a tensor of shape"),  # changes its shape after the probe
        ("elsewhere", "mlp", "LookupError: the helper's bug"),  # raised in another module
        ("backward_elsewhere", "mlp", "ArithmeticError: the helper's backward"),
        ("no_memory", "mlp", "MemoryError: the user's own"),  # the user's, not the machine's
        ("to_meta", "stacked transformer", "returned a tensor on the meta device"),
        ("elsewhere", "stacked transformer", "LookupError: the helper's bug"),
    ],
)
def test_what_user_code_did_is_named_wherever_it_is_defined(
    attribute, engine, said, data_dir, user_code, tmp_path, capsys
):
    """Before: a 66-82-line traceback (meta, None, float64, another module), or a MemoryError
    reported as the machine's with advice to lower the model's settings."""
    out = tmp_path / "out"
    if engine == "mlp":
        argv = _argv(data_dir, out)
        argv[argv.index("gelu")] = f"acts:{attribute}"
    else:
        argv = _lm_argv(data_dir, out, f"acts:{attribute}", "train.stack=on", "train.seeds=2")
    assert main(argv) == 2
    err = _one_line(_error(capsys))
    assert f"activation 'acts:{attribute}'" in err and said in err, err
    assert "training epoch 1" in err and "new label" in err
    assert "out of memory" not in err and "lower them" not in err
    assert {run.status for run in read_runs(out)} == {"failed"}


def test_a_feasible_evaluation_batch_is_not_refused(data_dir, tmp_path, capsys):
    """Before: refused as beyond the machine's memory; the batch holds at most the windows the
    corpus has, so it evaluates them in one batch."""
    out = tmp_path / "out"
    assert main(_lm_argv(data_dir, out, "gelu", "train.eval_batch_size=1000000000")) == 0
    assert {run.status for run in read_runs(out)} == {"done"}


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("train.tokens_per_param=1e300", "train.tokens_per_param"),  # overflowed the steps
        ("train.tokens_per_param=1e12", "train.tokens_per_param"),
        ("train.steps_per_epoch=100000000", "train.steps_per_epoch"),
    ],
)
def test_steps_per_epoch_set_or_derived_are_bounded(setting, said, data_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(_lm_argv(data_dir, out, "gelu", setting)) == 2
    err = _one_line(_error(capsys))
    assert said in err and "at most 10,000,000 steps per epoch" in err
    assert not (out / "records.sqlite").exists()


# ------------------------------------------------------------------------ processes that end


def test_an_activation_ending_the_process_with_workers_0_is_named(data_dir, user_code, tmp_path):
    """Before: `gelus run` exited 0 with no output and the run left `running`."""
    out = tmp_path / "out"
    argv = _argv(data_dir, out, workers=0)
    argv[argv.index("gelu")] = "acts:exits"
    done = _gelus(argv, cwd=user_code)
    assert done.returncode == 2, done.stderr[-2000:]
    err = _one_line(done.stderr)
    assert "'acts:exits'" in err and "ended the process (exit status 0" in err
    assert "training epoch 1" in err and "marked failed" in err
    assert {run.status for run in read_runs(out)} == {"failed"}


def test_a_supervised_command_ends_as_before_when_it_finishes(tmp_path):
    """argparse's own ends (--help, a usage error) are the command's, not a process that ended."""
    done = _gelus(["run", "--no-such-flag"], cwd=tmp_path)
    assert done.returncode == 2 and "ended" not in done.stderr
    assert done.stderr.count("error:") == 1 and "usage: gelus run" in done.stderr


def test_an_activation_ending_the_process_in_its_probe_is_named(data_dir, user_code, tmp_path):
    argv = _argv(data_dir, tmp_path / "out", workers=0)
    argv[argv.index("gelu")] = "acts:exits_in_probe"
    done = _gelus(argv, cwd=user_code)
    assert done.returncode == 2, done.stderr[-2000:]
    err = _one_line(done.stderr)
    assert "'acts:exits_in_probe'" in err and "called on a probe tensor" in err
    assert not (tmp_path / "out" / "records.sqlite").exists()


def _two_workers(data_dir, out, activation, epochs=2):
    argv = _argv(data_dir, out, workers=2, epochs=epochs)
    at = argv.index("gelu")
    argv[at : at + 1] = ["gelu", activation]
    return argv


def test_an_activation_ending_its_worker_is_named_and_the_other_run_not_left_running(
    data_dir, user_code, tmp_path, monkeypatch, capsys
):
    """Two workers, in this process: one job's activation ends its worker; the other's (GELU)
    must not be left `running`. Before: a worker "died abruptly", the other run left `running`."""
    out = tmp_path / "out"
    monkeypatch.setenv("EXIT_CODE", "3")
    assert main(_two_workers(data_dir, out, "acts:exits")) == 2
    err = _one_line(_error(capsys))
    assert "'acts:exits'" in err and "ended its worker process (exit status 3" in err
    assert "training epoch 1" in err
    statuses = {run.activation: run.status for run in read_runs(out)}
    assert statuses["exits"] == "failed" and statuses["gelu"] in ("done", "failed")


def test_a_worker_failing_lets_the_other_workers_run_finish(data_dir, user_code, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(_two_workers(data_dir, out, "acts:elsewhere")) == 2
    err = _one_line(_error(capsys))
    assert "'acts:elsewhere'" in err and "LookupError" in err
    statuses = {run.activation: run.status for run in read_runs(out)}
    assert statuses == {"gelu": "done", "elsewhere": "failed"}
    assert {r.epoch for r in read_records(out) if r.activation == "gelu"} == {0, 1, 2}


# ------------------------------------------------------------------------ the command line


def _python(code: str, *args: str, env: dict | None = None, cwd=None):
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, "PYTHONPATH": str(SRC), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


_RUN_GELUS = (
    "import runpy, sys; sys.argv[0] = 'gelus'; runpy.run_module('gelus', run_name='__main__')"
)


@pytest.mark.parametrize("missing", ["torch", "numpy"])
def test_version_without_torch_or_numpy(missing):
    done = _python(f"import sys; sys.modules[{missing!r}] = None; {_RUN_GELUS}", "--version")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stdout.startswith("gelus 0.1.0 (")
    if missing == "torch":
        assert "torch does not import" in done.stdout


def test_version_with_a_broken_torch(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "raise OSError('libtorch_cpu.so: cannot open shared object file')\n"
    )
    done = _python(_RUN_GELUS, "--version", env={"PYTHONPATH": f"{tmp_path}:{SRC}"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "torch does not import: OSError: libtorch_cpu.so" in done.stdout
    done = _python(_RUN_GELUS, "list", env={"PYTHONPATH": f"{tmp_path}:{SRC}"})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "libtorch_cpu.so" in done.stderr


class _FullStdout:
    """A stdout on a full disk."""

    def write(self, text):
        raise OSError(28, "No space left on device")

    def flush(self):
        pass


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--version"], "gelus: error: cannot write the version to stdout"),  # before: status 0
        (["list"], "gelus list: error: cannot write to stdout"),
    ],
)
def test_output_that_stdout_refuses_is_one_line_and_not_success(argv, said, monkeypatch, capsys):
    """What `> /dev/full` gives (the same OSError, errno ENOSPC)."""
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    try:
        status = main(argv)
    except SystemExit as stopped:  # --version ends as argparse's version action does
        status = stopped.code
    assert status == 1
    assert capsys.readouterr().err == f"{said} (No space left on device)\n"


INSTALL = Path(__file__).resolve().parents[2] / "scripts" / "install.sh"


@pytest.mark.parametrize("flags", [["--devv"], ["--dev", "--corpra"], ["extra"]])
def test_install_script_refuses_unknown_flags_with_its_usage(flags):
    """Before: it read only its first flag and ignored the rest (or a misspelt one)."""
    done = subprocess.run(["bash", str(INSTALL), *flags], capture_output=True, text=True)
    assert done.returncode == 2
    assert f"unknown option '{flags[-1]}'" in done.stderr and "usage:" in done.stderr


def test_install_script_reads_every_flag():
    done = subprocess.run(["bash", str(INSTALL), "--dev", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage:")  # --help, after --dev
    text = INSTALL.read_text()
    assert 'for flag in "$@"' in text and '"${1:-}"' not in text


@pytest.mark.parametrize("bench", ["transformer", "kernels"])
def test_bench_json_into_a_missing_folder_is_refused_before_the_run(bench, tmp_path, capsys):
    path = tmp_path / "missing" / "bench.json"
    began = time.perf_counter()
    assert main(["bench", bench, "--json", str(path)]) == 2
    err = _one_line(_error(capsys), "bench")
    assert f"--json {path}" in err and "does not exist" in err and ".tmp" not in err
    assert time.perf_counter() - began < 5  # checked before any timing


def test_a_file_written_into_a_missing_folder_names_the_users_path(tmp_path):
    from gelus.experiments.files import atomic_write

    path = tmp_path / "missing" / "out.json"
    with pytest.raises(FileNotFoundError) as raised, atomic_write(path) as handle:
        handle.write("{}")
    assert raised.value.filename == str(path) and ".tmp" not in str(raised.value)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--context", "10000000"], "--context 10000000"),  # before: an allocation traceback
        (["--batch", "1000000000"], "--batch 1000000000"),
    ],
)
def test_bench_transformer_sizes_beyond_the_machine_are_refused(options, said, capsys):
    began = time.perf_counter()
    assert main(["bench", "transformer", *options]) == 2
    err = _one_line(_error(capsys), "bench")
    assert said in err and "this machine's memory" in err and "×" in err and "lower them" in err
    assert time.perf_counter() - began < 10
