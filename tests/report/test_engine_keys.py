"""``report/`` names no engine's config keys: each engine describes its own setup
(``EnginePlugin.describe_setup``), the keys that size its model (``size_keys``) and its init key
(``init_key``), and the report asks the engine of a config's ``task`` (issue 44, item 2)."""

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace

from gelus.experiments.config import config_to_dict, flat_config, plugin_for_task
from gelus.experiments.engine import EnginePlugin
from gelus.report.axes import size_keys
from gelus.report.setup import setup_table
from toy_engine import ToyConfig

REPORT = Path(__file__).resolve().parents[2] / "src" / "gelus" / "report"
KEY = re.compile(r"\b(?:model|optim|train|data)\.[A-Za-z_]*")
# The keys the harness's core reads of every engine's config (gelus.experiments.engine's
# docstring: task, dataset, activations, model.approximate, optim.lr, train.epochs / batch_size /
# seeds), so no engine's own: the setup table's epochs, batch size and GELU form, and the steps
# per epoch (steps over train.epochs).
GENERIC = {"model.approximate", "train.epochs", "train.batch_size"}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def test_report_names_no_engine_config_key():
    """Every string in report/'s code (docstrings aside: prose) holds no dotted config key, nor
    a bare prefix such as "model.", beyond the harness's generic ones."""
    found = []
    for path in sorted(REPORT.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
            ):
                keys = set(KEY.findall(node.value)) - GENERIC
                found += [f"{path.name}:{node.lineno}: {k}" for k in sorted(keys)]
    assert not found, "engine keys in report/ (let the engine describe them):\n" + "\n".join(found)


def _runs(config: dict, metadata: dict) -> list[SimpleNamespace]:
    stored = {"config_json": json.dumps(config), "metadata_json": json.dumps(metadata)}
    return [
        SimpleNamespace(**stored, seed=seed, lr=0.01, setting="", config_hash="h")
        for seed in (0, 1)
    ]


def test_an_engines_description_reaches_the_setup_table():
    """The toy engine's own words for its model and an aspect of its own are the setup table's
    rows, found through its config's task (no preset), beside the generic ones."""
    table = setup_table(None, _runs(config_to_dict(ToyConfig()), {"train_size": 60, "steps": 12}))
    rows = {aspect: ours for aspect, _, ours in table}
    assert rows["model"] == "4 hidden units"
    assert rows["loss"] == "squared error"
    assert rows["training set"] == "60"  # the metadata's count where the engine words none
    assert rows["epochs"] == "4" and rows["batch size"] == "20"


def test_an_engine_that_describes_nothing_gets_the_defaults():
    assert EnginePlugin().describe_setup({}, {}) == {}
    assert plugin_for_task("no such task") is None
    config = {"task": "no such task", "model": {"width": 4}, "train": {"epochs": 2}}
    table = setup_table(None, _runs(config, {"train_size": 60}))
    assert "model" not in {aspect for aspect, _, _ in table}
    assert size_keys([{"task": "no such task"}]) == EnginePlugin.size_keys
    assert size_keys([flat_config(config_to_dict(ToyConfig()))]) == EnginePlugin.size_keys
