"""The paper's claims as the paper made them, each checked on the measure it is about.

Figure 2 is about *training* log loss ("GELU tends to have the lowest median training log loss"),
Figure 3 about robustness as noise grows, Figure 4 about reconstruction error, and the Discussion
ranks SiLU between GELU and ReLU/ELU. Each claim is a set of paired comparisons on the seeds both
activations ran (paired t-test, Holm over the claim's comparisons, :mod:`gelus.report.stats`), and
its verdict is ✓ holds (every comparison goes the claimed way), ✗ contradicted (one goes the other
way), or · unresolved. An activation the paper never ranked enters no claim.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from gelus.experiments.protocol import Protocol
from gelus.experiments.selection import Selection, select
from gelus.report.stats import Comparison, adjust, compare_paired

__all__ = ["ClaimCheck", "check_claims"]

NOISE_RANGE = (0.0, 3.0)  # the paper's Figure 3 spans a in [0, 3]


class ClaimCheck(NamedTuple):
    experiment: str
    claim: str  # the paper's words
    measure: str  # what was compared
    comparisons: tuple[Comparison, ...]
    verdict: str  # "✓ holds", "✗ contradicted", "· unresolved", or "— not run"
    depends: str = ""  # where another selection rule gives another verdict: each rule's


def _verdict(comparisons: Sequence[Comparison], wanted: Sequence[str]) -> str:
    """holds when each comparison's word is among its wanted ones (``"better"`` or
    ``"better|tie"``), contradicted when one went the other way."""
    if not comparisons:
        return "— not run"
    words = [c.verdict.split()[-1] for c in comparisons]
    if all(w in want.split("|") for w, want in zip(words, wanted, strict=True)):
        return "✓ holds"
    opposite = {"better": "worse", "worse": "better"}
    if any(w == opposite.get(want.split("|")[0]) for w, want in zip(words, wanted, strict=True)):
        return "✗ contradicted"
    return "· unresolved"


def _by(selections: Sequence[Selection], activation: str) -> list[Selection]:
    return [s for s in selections if s.activation.lower() == activation]


def _compare(selections, treatment: str, baselines: Sequence[str]):
    """Paired comparisons treatment − baseline in each setting, Holm over them."""
    pairs = [
        (t, b)
        for t in _by(selections, treatment)
        for name in baselines
        for b in _by(selections, name)
        if b.setting == t.setting and b.config_hash == t.config_hash
        and (t.lr_selected or b.lr == t.lr)
    ]  # fmt: skip
    return adjust([compare_paired(t, b, lower_is_better=t.metric != "accuracy") for t, b in pairs])


def _lowest(name, records, protocol, configs, claim, split, metric, measure):
    chosen = dataclasses.replace(protocol, report_split=split, report_metrics=(metric,))
    selections = select(records, chosen, configs)
    comparisons = _compare(selections, "gelu", ("relu", "elu"))
    return ClaimCheck(name, claim, measure, tuple(comparisons),
                      _verdict(comparisons, ["better"] * len(comparisons)))  # fmt: skip


def _robustness(name, records, protocol, configs, claim) -> ClaimCheck:
    """Paired area under the test error against noise half-width a over [0, 3] (trapezoid), of
    the final models at each activation's selected lr."""
    headline = [s for s in select(records, protocol, configs) if s.metric == "error"]
    areas = []
    for s in headline:
        values = {}
        for seed in s.values:
            curve = {}
            for key, by_epoch in _noise_curves(records).items():
                (chash, activation, setting, lr, run_seed), level = key
                if (chash, activation, setting, lr, run_seed) == (
                    s.config_hash,
                    s.activation,
                    s.setting,
                    s.lr,
                    seed,
                ) and NOISE_RANGE[0] <= level <= NOISE_RANGE[1]:
                    curve[level] = by_epoch[max(by_epoch)]
            if len(curve) >= 2:
                levels = sorted(curve)
                values[seed] = float(np.trapezoid([curve[a] for a in levels], levels))
        areas.append(s._replace(values=values, metric="error·a"))
    comparisons = _compare(areas, "gelu", ("relu", "elu"))
    return ClaimCheck(name, claim, "area under test error vs noise a ∈ [0, 3]",
                      tuple(comparisons), _verdict(comparisons, ["better|tie"] * len(comparisons)))  # fmt: skip


def _noise_curves(records) -> dict:
    curves: dict = {}
    for r in records:
        if r.split.startswith("test@noise=") and r.metric == "error":
            level = float(r.split.split("=", 1)[1])
            key = ((r.config_hash, r.activation, r.setting, float(r.lr), int(r.seed)), level)
            curves.setdefault(key, {})[int(r.epoch)] = float(r.value)
    return curves


def _silu(name, records, protocol, configs) -> ClaimCheck | None:
    selections = select(records, protocol, configs)
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    if not _by(headline, "silu"):
        return None
    comparisons = _compare(headline, "silu", ("gelu", "relu", "elu"))
    wanted = [
        "worse" if c.baseline.lower() == "gelu" else "better" for c in comparisons
    ]  # fmt: skip
    return ClaimCheck(
        name, "SiLU performs worse than GELUs but usually better than ReLUs and ELUs "
        "(Discussion)", f"test {headline[0].metric}", tuple(comparisons),
        _verdict(comparisons, wanted),
    )  # fmt: skip


def check_claims(
    name: str, records: Sequence[Any], protocol: Protocol, configs
) -> list[ClaimCheck]:
    """The paper's claims about experiment ``name`` checked on its finished records."""
    checks = []
    if name == "mnist-classification":
        checks.append(_lowest(
            name, records, protocol, configs,
            "GELU tends to have the lowest median training log loss (Figure 2)", "train", "loss",
            "training log loss (dropout off) at the last epoch",
        ))  # fmt: skip
    elif name == "mnist-noise":
        checks.append(_robustness(
            name, records, protocol, configs,
            "GELU matches or exceeds ReLU and ELU as noise grows (Figure 3)",
        ))  # fmt: skip
    elif name == "mnist-autoencoder":
        checks.append(_lowest(
            name, records, protocol, configs,
            "GELU has the lowest reconstruction error (Figure 4)", "test", "recon_error",
            "test reconstruction error at the last epoch",
        ))  # fmt: skip
    if name.startswith("mnist") and (silu := _silu(name, records, protocol, configs)):
        checks.append(silu)
    return checks
