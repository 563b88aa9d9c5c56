"""Any activation through the paper's benchmark: `module:attribute` runs, resumes, is reported
beside GELU with paired differences, and edited code is never pooled with the old records."""

import math
import sys
import textwrap

import pytest
import torch

from gelus.cli import main as gelus_main
from gelus.experiments import read_records, read_runs, run_experiment
from gelus.experiments.errors import SettingError
from gelus.report.render import unwrapped
from test_run import TINY, write_tiny_mnist

SMALL = [*TINY, "train.train_subset=300", "train.eval_train_subset=100", "train.keep=1"]
ACTS = textwrap.dedent(
    """
    import torch
    from torch import nn

    def softsign_cube(x):
        return x / (1 + x.abs()) + 0.1 * x ** 3

    class Bent(nn.Module):
        def forward(self, x):
            return (torch.sqrt(x * x + 1) - 1) / 2 + x
    """
)


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A tiny MNIST and a module of activations in the current directory."""
    write_tiny_mnist(tmp_path / "data" / "mnist")
    name = f"my_acts_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(ACTS)
    monkeypatch.chdir(tmp_path)
    yield tmp_path, name
    sys.modules.pop(name, None)


def _run(root, activations, **kwargs):
    return run_experiment(
        "mnist-classification",
        out_dir=root / "out",
        data_dir=root / "data",
        workers=kwargs.pop("workers", 0),
        verify=False,
        activations=activations,
        seeds=2,
        epochs=1,
        overrides=SMALL,
        **kwargs,
    )


def test_a_module_attribute_activation_runs_resumes_and_is_reported(workspace):
    from gelus.experiments import PRESETS
    from gelus.report.render import write_report

    root, module = workspace
    # one worker process: the worker imports the user's module by name from this directory
    _run(root, ["gelu", f"{module}:softsign_cube", f"bent={module}:Bent"], workers=1)
    records, runs = read_records(root / "out"), read_runs(root / "out")
    assert {r.activation for r in runs} == {"gelu", "softsign_cube", "bent"}
    assert len({r.config_hash for r in runs}) == 1  # compared within one config
    sources = runs[0].metadata["activation_sources"]
    assert sources["bent"]["spec"] == f"{module}:Bent" and sources["bent"]["kind"] == "class"
    assert len(sources["softsign_cube"]["sha256"]) == 64

    _run(root, ["gelu", f"{module}:softsign_cube", f"bent={module}:Bent"])  # resumed: nothing new
    assert len(read_records(root / "out")) == len(records)

    _, md_path = write_report(
        records, runs, root / "report", presets=PRESETS, activation_figure=False
    )
    md = unwrapped(md_path.read_text())  # tables as pipe tables
    assert "| softsign_cube |" in md and "| bent |" in md
    assert "softsign_cube − gelu" in md or "gelu − softsign_cube" in md  # paired differences


def test_edited_code_is_refused_beside_the_old_records(workspace):
    root, module = workspace
    _run(root, [f"{module}:softsign_cube"])
    (root / f"{module}.py").write_text(ACTS.replace("0.1 * x", "0.2 * x"))
    with pytest.raises(SettingError, match=r"made by other code.*softsign_cube2="):
        _run(root, [f"{module}:softsign_cube"])
    _run(root, [f"softsign_cube2={module}:softsign_cube"])  # the new version under its own label
    assert {r.activation for r in read_runs(root / "out")} == {"softsign_cube", "softsign_cube2"}


def test_the_python_api_takes_importable_objects(workspace):
    import importlib

    root, module = workspace
    sys.path.insert(0, str(root))  # as a script beside the module would have it
    try:
        bent = importlib.import_module(module).Bent
    finally:
        sys.path.remove(str(root))
    _run(root, {"mine": bent})
    assert {r.activation for r in read_runs(root / "out")} == {"mine"}
    with pytest.raises(SettingError, match="defined in a function"):
        _run(root, {"local": lambda x: x})


@pytest.mark.parametrize(
    ("argv_tail", "message"),
    [
        (["no_such_module_q:act"], "cannot import module 'no_such_module_q'"),
        (["{m}:nothing"], "has no attribute 'nothing'"),
        (["relu", "relu={m}:Bent"], "relu named twice"),
    ],
)
def test_cli_refuses_bad_activations_in_one_line(workspace, capsys, argv_tail, message):
    root, module = workspace
    argv = ["run", "mnist-classification", "--out", str(root / "out"), "--data-dir",
            str(root / "data"), "--no-verify", "--epochs", "1", "--seeds", "1", "--workers", "0",
            *[a for o in SMALL for a in ("--set", o)], "--activations", *[a.format(m=module) for a in argv_tail]]  # fmt: skip
    assert gelus_main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_mlp_engine_takes_the_device_flag(workspace):
    root, _ = workspace
    if torch.cuda.is_available():
        pytest.skip(
            "checks the refusal on a machine without CUDA; tests/test_runs_on_cuda.py runs it"
        )
    with pytest.raises(SettingError, match="no CUDA device"):
        _run(root, ["gelu"], device="cuda")
    _run(root, ["gelu"], device="auto")  # auto is the CPU here
    assert {r.metadata["device"] for r in read_runs(root / "out")} == {"cpu"}


def test_the_wrn_init_uses_a_custom_activations_own_gain(workspace):
    """He init with gain 1/√E[f(z)²]: f = Bent has E[f²] by scipy quadrature, not ReLU's 2."""
    from scipy import integrate, stats

    from gelus.experiments.engines.cnn.config import CIFAR100WRNConfig
    from gelus.experiments.engines.cnn.engine import build_cnn

    _, module = workspace

    def bent(z):
        return (math.sqrt(z * z + 1) - 1) / 2 + z

    second_moment = integrate.quad(lambda z: bent(z) ** 2 * stats.norm.pdf(z), -40, 40)[0]
    torch.manual_seed(0)
    from gelus.experiments.activation_spec import resolve_activation

    model = build_cnn(CIFAR100WRNConfig(), resolve_activation(f"{module}:Bent"), num_classes=100)
    convs = [
        m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)
    ]
    weight = convs[-1].weight  # 256 × 256 × 3 × 3: the sample std is exact to ≈ 0.1 %
    expected = 1 / math.sqrt(second_moment) / math.sqrt(weight[0].numel())
    assert abs(weight.std().item() / expected - 1) < 0.01
