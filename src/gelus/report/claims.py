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
from gelus.report.judge import judge_pairs
from gelus.report.metrics import ClaimVerdict, Verdict
from gelus.report.stats import DESIGN, HEADLINE, Aggregate, Comparison, Design

__all__ = ["NOISE_RANGE", "ClaimCheck", "check_claims", "noise_areas"]

NOISE_RANGE = (0.0, 3.0)  # the paper's Figure 3 spans a in [0, 3]


class ClaimCheck(NamedTuple):
    experiment: str
    claim: str  # the paper's words
    measure: str  # what was compared
    comparisons: tuple[Comparison, ...]
    verdict: ClaimVerdict
    depends: str = ""  # where another selection rule gives another verdict: each rule's


class _Claims(NamedTuple):
    """One experiment's finished records and how its statistics are taken."""

    name: str
    records: Sequence[Any]
    protocol: Protocol
    configs: Any
    aggregate: Aggregate
    design: Design

    def select(self, protocol: Protocol | None = None) -> list[Selection]:
        return select(self.records, protocol or self.protocol, self.configs, self.aggregate)

    def compare(self, selections, treatment: str, baselines: Sequence[str]) -> list[Comparison]:
        """Paired comparisons treatment − baseline in each setting, Holm over them."""
        pairs = [
            (t, b)
            for t in _by(selections, treatment)
            for name in baselines
            for b in _by(selections, name)
            if b.setting == t.setting
            and b.config_hash == t.config_hash
            and (t.lr_selected or b.lr == t.lr)
        ]
        return judge_pairs(pairs, self.design, self.aggregate, by_config=False)

    def check(self, claim: str, measure: str, comparisons, wanted) -> ClaimCheck:
        return ClaimCheck(
            self.name, claim, measure, tuple(comparisons), _verdict(comparisons, wanted)
        )


def _verdict(
    comparisons: Sequence[Comparison], wanted: Sequence[tuple[Verdict, ...]]
) -> ClaimVerdict:
    """holds when each comparison's verdict is among its wanted ones (better, or better or a
    tie), contradicted when one went the other way of the first it wanted."""
    if not comparisons:
        return ClaimVerdict.NOT_RUN
    pairs = list(zip((c.verdict for c in comparisons), wanted, strict=True))
    if all(verdict in want for verdict, want in pairs):
        return ClaimVerdict.HOLDS
    if any(verdict.significant and verdict == want[0].flipped() for verdict, want in pairs):
        return ClaimVerdict.CONTRADICTED
    return ClaimVerdict.UNRESOLVED


def _by(selections: Sequence[Selection], activation: str) -> list[Selection]:
    return [s for s in selections if s.activation.lower() == activation]


def _lowest(claims: _Claims, claim: str, split: str, metric: str, measure: str) -> ClaimCheck:
    chosen = dataclasses.replace(claims.protocol, report_split=split, report_metrics=(metric,))
    comparisons = claims.compare(claims.select(chosen), "gelu", ("relu", "elu"))
    return claims.check(claim, measure, comparisons, [(Verdict.BETTER,)] * len(comparisons))


def noise_areas(records: Sequence[Any]) -> dict[tuple, float]:
    """{(config hash, activation, setting, lr, seed): area}: the trapezoid area under each run's
    final test error against the noise half-width a over ``NOISE_RANGE`` (runs with at least two
    levels there), in error·a."""
    curves: dict[tuple, dict[float, float]] = {}
    for (run, level), by_epoch in _noise_curves(records).items():
        if NOISE_RANGE[0] <= level <= NOISE_RANGE[1]:
            curves.setdefault(run, {})[level] = by_epoch[max(by_epoch)]
    return {
        run: float(np.trapezoid([curve[a] for a in sorted(curve)], sorted(curve)))
        for run, curve in curves.items()
        if len(curve) >= 2
    }


def _area(records, s: Selection, seed: int) -> float | None:
    """One seed's :func:`noise_areas` at ``s``'s config, activation, setting and lr (None below
    two levels)."""
    return noise_areas(records).get((s.config_hash, s.activation, s.setting, s.lr, seed))


def _robustness(claims: _Claims, claim: str) -> ClaimCheck:
    """Paired area under the test error against noise half-width a over [0, 3] (trapezoid), of
    the final models at each activation's selected lr."""
    headline = [s for s in claims.select() if s.metric == "error"]
    areas = []
    for s in headline:
        values = {seed: _area(claims.records, s, seed) for seed in s.values}
        kept = {seed: area for seed, area in values.items() if area is not None}
        areas.append(s._replace(values=kept, metric="error·a"))
    comparisons = claims.compare(areas, "gelu", ("relu", "elu"))
    measure = "area under test error vs noise a ∈ [0, 3]"
    wanted = [(Verdict.BETTER, Verdict.TIE)] * len(comparisons)
    return claims.check(claim, measure, comparisons, wanted)


def _noise_curves(records) -> dict:
    curves: dict = {}
    for r in records:
        if r.split.startswith("test@noise=") and r.metric == "error":
            level = float(r.split.split("=", 1)[1])
            key = ((r.config_hash, r.activation, r.setting, float(r.lr), int(r.seed)), level)
            curves.setdefault(key, {})[int(r.epoch)] = float(r.value)
    return curves


def _silu(claims: _Claims) -> ClaimCheck | None:
    selections = claims.select()
    headline = [s for s in selections if s.metric == selections[0].metric] if selections else []
    if not _by(headline, "silu"):
        return None
    comparisons = claims.compare(headline, "silu", ("gelu", "relu", "elu"))
    wanted = [
        (Verdict.WORSE,) if c.baseline.lower() == "gelu" else (Verdict.BETTER,) for c in comparisons
    ]
    claim = "SiLU performs worse than GELUs but usually better than ReLUs and ELUs (Discussion)"
    return claims.check(claim, f"test {headline[0].metric}", comparisons, wanted)


def check_claims(
    name: str,
    records: Sequence[Any],
    protocol: Protocol,
    configs,
    aggregate: Aggregate = HEADLINE,
    design: Design = DESIGN,
) -> list[ClaimCheck]:
    """The paper's claims about experiment ``name`` checked on its finished records, the lr chosen
    by ``aggregate`` over seeds and each comparison tested as ``design`` says."""
    claims = _Claims(name, records, protocol, configs, aggregate, design)
    checks = []
    if name == "mnist-classification":
        claim = "GELU tends to have the lowest median training log loss (Figure 2)"
        measure = "training log loss (dropout off) at the last epoch"
        checks.append(_lowest(claims, claim, "train", "loss", measure))
    elif name == "mnist-noise":
        claim = "GELU matches or exceeds ReLU and ELU as noise grows (Figure 3)"
        checks.append(_robustness(claims, claim))
    elif name == "mnist-autoencoder":
        claim = "GELU has the lowest reconstruction error (Figure 4)"
        measure = "test reconstruction error at the last epoch"
        checks.append(_lowest(claims, claim, "test", "recon_error", measure))
    if name.startswith("mnist") and (silu := _silu(claims)):
        checks.append(silu)
    return checks
