"""``gelus bench transformer`` at a tiny shape: every row timed, ratios to the plain loop, the
share of the bmm rate, and the JSON it writes."""

import argparse
import json
import math

from gelus.bench.transformer import add_arguments, main


def test_a_tiny_transformer_bench_times_every_row(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args([
        "--activations", "gelu", "reglu", "--d-model", "16", "--layers", "1", "--heads", "2",
        "--context", "16", "--batch", "2", "--steps", "1", "--rounds", "1", "--json", str(out),
    ])  # fmt: skip
    assert main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"plain loop (F.gelu)", "engine gelu", "engine reglu"}
    assert rows["plain loop (F.gelu)"]["vs_plain"] == 1.0
    assert all(math.isfinite(r["seconds_per_step"]) and r["of_bmm_rate"] > 0 for r in rows.values())
    printed = capsys.readouterr().out
    assert "of bmm" in printed and "target: an engine row within 1.05×" in printed
    engine_lines = [line for line in printed.splitlines() if line.startswith("| engine")]
    assert len(engine_lines) == 2 and all(
        line.rstrip(" |").endswith(("yes", "no")) for line in engine_lines
    )


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
