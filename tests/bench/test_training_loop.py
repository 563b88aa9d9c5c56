"""`gelus bench training` (the CPU bench: the engine against the seed-004 loop and the bmm rate),
run end to end on a small random dataset of MNIST's shapes."""

import argparse

import torch

from gelus.bench import training


def test_the_bench_prints_every_method_with_a_positive_time(monkeypatch, capsys):
    from gelus.data import Dataset, TensorSplit

    generator = torch.Generator().manual_seed(0)

    def split(n: int) -> TensorSplit:
        images = torch.randint(0, 256, (n, 28, 28), generator=generator).to(torch.uint8)
        return TensorSplit(images, torch.randint(0, 10, (n,), generator=generator))

    data = Dataset("fashion-mnist", split(128), split(16), split(32), 10, "random")
    monkeypatch.setattr("gelus.data.load", lambda name, data_dir=None: data)
    parser = argparse.ArgumentParser()
    training.add_arguments(parser)
    args = parser.parse_args(
        ["--samples", "128", "--rounds", "1", "--models", "2", "--no-seed-default-threads"]
    )
    assert training.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {cells[1].strip(): cells[2:] for cells in (line.split("|") for line in lines[3:6])}
    assert list(rows) == ["seed-004 loop, 1 thread", "engine", "engine, training only"]
    assert all(float(cells[0]) > 0 for cells in rows.values())  # s/model-epoch
    assert float(rows["engine"][2]) > 0  # GFLOP/s of the engine
    assert lines[-1].startswith("bmm [8,512,512]² on 1 thread, same rounds: ")
