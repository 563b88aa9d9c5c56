"""``gelus bench transformer`` at a tiny shape: every row timed, ratios to the plain loop, the
share of the bmm rate, and the JSON it writes."""

import argparse
import json
import math

import pytest

from gelus.bench.transformer import ACTIVATIONS, TORCH_GELU, add_arguments, main


def test_a_tiny_transformer_bench_times_every_row(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args([
        "--activations", "gelu", TORCH_GELU, "reglu", "--d-model", "16", "--layers", "1", "--heads", "2",
        "--context", "16", "--batch", "2", "--steps", "1", "--rounds", "1", "--json", str(out),
    ])  # fmt: skip
    assert main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {
        "plain loop (F.gelu)", "engine gelu", "engine torch_gelu", "engine reglu"
    }  # fmt: skip
    assert rows["plain loop (F.gelu)"]["vs_plain"] == 1.0
    assert all(math.isfinite(r["seconds_per_step"]) and r["of_bmm_rate"] > 0 for r in rows.values())
    printed = capsys.readouterr().out
    assert "of bmm" in printed and "target: an engine row within 1.05×" in printed
    engine_lines = [line for line in printed.splitlines() if line.startswith("| engine")]
    assert len(engine_lines) == 3 and all(
        line.rstrip(" |").endswith(("yes", "no")) for line in engine_lines
    )


def test_the_default_rows_hold_the_engines_own_overhead():
    """By default the engine trains torch's own F.gelu too: that row against the plain loop (F.gelu
    in both) is the engine's overhead, apart from the activation's cost."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = parser.parse_args([]).activations
    assert TORCH_GELU in defaults and defaults[0] == "gelu" and list(ACTIVATIONS) == defaults


def test_the_cuda_rows_need_a_cuda_device(monkeypatch):
    import pytest
    import torch

    from gelus.experiments.errors import CommandError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--device", "cuda", "--d-model", "16", "--layers", "1"])
    with pytest.raises(CommandError, match="no CUDA device"):
        main(args)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--heads", "0"], "--heads 0: invalid value; expected at least 1"),
        (["--layers", "0"], "--layers 0: invalid value; expected at least 1"),
        (
            ["--d-model", "30", "--heads", "4"],
            "--heads 4: invalid value; expected a divisor of --d-model (30)",
        ),
        (["--stack", "-1"], "--stack -1: invalid value; expected 0 (none) or from 1 to 10,000"),
        (
            ["--stack", "100000"],
            "--stack 100000: invalid value; expected 0 (none) or from 1 to 10,000",
        ),
        (["--context", "0"], "--context 0: invalid value; expected at least 1"),
        (["--batch", "0"], "--batch 0: invalid value; expected at least 1"),
        (["--steps", "0"], "--steps 0: invalid value; expected at least 1"),
        (["--rounds", "0"], "--rounds 0: expected at least 1 (medians want 5 or more)"),
    ],
)
def test_out_of_range_options_are_one_line_by_the_presets_checks(options, words, capsys):
    """Each option is checked by the range its config key has in the presets' config checks,
    before anything is built or timed: one line naming the option and its range, exit status 2."""
    from gelus.cli import main as gelus_main

    assert gelus_main(["bench", "transformer", "--activations", "gelu", *options]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"gelus bench: error: {words}\n" and captured.out == ""


def test_heads_zero_is_refused_by_the_command_without_a_traceback():
    import os
    import subprocess
    import sys
    from pathlib import Path

    import gelus

    done = subprocess.run(
        [sys.executable, "-m", "gelus", "bench", "transformer", "--heads", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(gelus.__file__).resolve().parents[1])},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "gelus bench: error: --heads 0: invalid value; expected at least 1\n"


def test_the_presets_checks_never_divide_by_zero_heads():
    from gelus.experiments.config import ConfigError, apply_overrides, validate
    from gelus.experiments.engines.transformer.config import TransformerExperimentConfig
    from gelus.experiments.engines.vit.config import ViTExperimentConfig

    for config in (TransformerExperimentConfig(), ViTExperimentConfig()):
        for override, key in (
            ("model.heads=0", "model.heads"),
            ("model.d_model=0", "model.d_model"),
        ):
            with pytest.raises(ConfigError, match=f"{key}: invalid value; expected at least 1"):
                validate(apply_overrides(config, [override]))
