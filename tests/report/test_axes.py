"""The report over axes: families of configs found from stored configs, the interaction verdicts
of a categorical axis and the trend verdicts of a scale axis, each against an independent
float64 computation (numpy, scipy), and `gelus report` end to end on records with both."""

import json
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy import stats as scipy_stats

from gelus.cli import main
from gelus.experiments.config import config_to_dict, flat_config, identity_keys, stored_defaults
from gelus.experiments.presets import PRESETS
from gelus.experiments.selection import run_configs
from gelus.report.analysis import analyse
from gelus.report.axes import families, sizes
from test_synthetic import make_records, write_database

SEEDS = tuple(range(6))


def _flat(preset: str, **values) -> dict:
    """The preset's stored flat identity config with ``values`` ("model.init": …) set."""
    config = PRESETS[preset].config
    return {**identity_keys(stored_defaults(flat_config(config_to_dict(config)))), **values}


def _families(configs: dict, preset: str):
    base = PRESETS[preset].config
    return families(configs, sizes(configs, base), _flat(preset))


def _holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: p_(i)·(m − i + 1), running max, capped at 1."""
    order = np.argsort(p)
    out, running = np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (len(p) - rank)))
        out[i] = running
    return out.tolist()


def _nested(flat: dict) -> dict:
    tree: dict = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = tree
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _runs_with(runs, flat: dict, **train):
    """The runs with ``flat`` (and train keys such as keep) as their stored config."""
    config = _nested(flat)
    config.setdefault("train", {}).update(train)
    return [r._replace(config_json=json.dumps(config)) for r in runs]


# --------------------------------------------------------------------------- families
def test_an_init_axis_is_a_family_though_its_new_values_ran_fewer_settings():
    # the default init ran keep 1.0 and 0.5, the new inits only 1.0 (--set train.keep=1.0): the
    # settings are swept inside a config, so they differ only in model.init
    runs = []
    for h, init, keep in (("a", "xavier", [1.0]), ("b", "unit_norm", [1.0, 0.5]), ("c", "he", [1.0])):  # fmt: skip
        _, mine = make_records(config_hash=h, epochs=1, seeds=(0,), lrs=(1e-3,))
        runs += _runs_with(mine, _flat("mnist-classification", **{"model.init": init}), keep=keep)
    # e differs from every other config in two keys: in no family
    other = {"model.init": "he", "train.batch_size": 64, "train.epochs": 3}
    other = _flat("mnist-classification", **other)
    runs += _runs_with(make_records(config_hash="e", epochs=1, seeds=(0,))[1], other)
    configs = run_configs(runs)
    assert set(configs) == {"a", "b", "c", "e"}
    (family,) = _families(configs, "mnist-classification")
    assert family.kind == "categorical" and family.keys == ("model.init",)
    # the preset's default first (the interactions' base), then the others by value
    assert family.members == ("b", "c", "a")
    assert family.labels == ("model.init=unit_norm", "model.init=he", "model.init=xavier")


def _lm(d_model: int, layers: int, epochs: int, **values) -> dict:
    keys = {"model.d_model": d_model, "model.layers": layers, "train.epochs": epochs}
    return _flat("transformer-lm", **keys, **values)


def test_a_scale_axis_with_training_length_tied_to_size_and_an_init_axis_at_one_size():
    configs = {
        "s1": _lm(64, 2, 1),
        "s2": _lm(128, 4, 2),  # d_model and layers together, the tokens ∝ N
        "s3": _lm(256, 4, 8),
        "t2": _lm(128, 4, 2, **{"model.init": "torch"}),  # an init axis at the middle size
        "w3": _lm(256, 2, 3, **{"optim.warmup": 0.0}),  # two keys off s3 at another size: none
    }
    counts = sizes(configs, PRESETS["transformer-lm"].config)
    init, scale = _families(configs, "transformer-lm")
    assert init.kind == "categorical" and init.members == ("s2", "t2")  # gpt2, the default, first
    assert scale.kind == "scale" and scale.members == ("s1", "s2", "s3")
    assert set(scale.keys) == {"model.d_model", "model.layers", "train.epochs"}
    n = [counts[h][0] for h in scale.members]
    assert n[0] < n[1] < n[2] and scale.sizes == tuple(n)
    # the LM's weights: 12·d² per layer (attention 4·d², FFN 2·4·d²), the byte embedding tied
    # to the head 256·d
    assert n[0] == 12 * 64**2 * 2 + 256 * 64
    assert scale.x == pytest.approx(np.log2(n))


def test_a_budget_axis_is_configs_of_one_size_that_differ_in_training_length():
    configs = {"e1": _lm(64, 2, 1), "e2": _lm(64, 2, 2), "e4": _lm(64, 2, 4), "big": _lm(128, 2, 1)}
    found = {f.kind: f for f in _families(configs, "transformer-lm")}
    assert found["budget"].members == ("e1", "e2", "e4")
    assert found["budget"].x == pytest.approx(np.log2([t * 200 * 16 * 128 for t in (1, 2, 4)]))
    assert found["scale"].members == ("e1", "big")  # one epoch, two sizes


def test_one_config_or_configs_without_a_common_axis_give_no_family():
    assert families({"a": _flat("mnist-classification")}) == []
    two_keys = _flat("mnist-classification", **{"model.init": "he", "train.epochs": 3})
    assert families({"a": _flat("mnist-classification"), "b": two_keys}) == []
