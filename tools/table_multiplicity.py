"""How many tests the README's results table and each docs/RESULTS.md section rest on, and which
of their verdicts survive a correction over all of them (docs/REPORT.md, "Multiplicity where the
claims are made").

    python tools/table_multiplicity.py              # print the summary, write the list below
    python tools/table_multiplicity.py --print-only # print it, write nothing

Every test is regenerated from the committed records, ``docs/results/*/records.sqlite.gz``,
through the report's own analysis (:func:`gelus.report.analysis.analyse`, as
``tools/regenerate_results.py`` does): the paired comparisons of the per-config verdict tables,
the paper's claims, the axis tables (interactions, each activation across the axis, trends) and
the learning-rate sensitivity tables. Each table's Holm families are recovered and checked: Holm
over a family's p-values must give the report's own Holm p.

A test that appears in two tables is counted once (same treatment and baseline, and the same
per-seed differences up to a positive factor: mnist-noise's clean-test verdicts are
mnist-classification's, bits per byte are nats ÷ ln 2). Over a scope's N tests, Holm's step-down
adjustment (family-wise error) and Benjamini–Hochberg's step-up one (false discovery rate, q =
0.05) are applied to the t-tests' p-values, and to the TOST p-values for a tie verdict; a
significant verdict survives when its adjusted p is below 0.05.

The list, ``docs/results/multiplicity.md``, holds every scope's counts, every significant verdict
with its p-values, the README's marks and the sentences README.md and docs/RESULTS.md must say;
``tests/report/test_multiplicity.py`` checks that the documents say them, and (slow) that the list
is what the records give.
"""

import argparse
import gzip
import math
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
LIST = RESULTS / "multiplicity.md"
ALPHA = 0.05  # Holm's family-wise level and BH's false discovery rate q
HOLM_MARK, BH_MARK = "◆", "◇"
SIGNIFICANT = ("better", "worse", "tie")


class Test(NamedTuple):
    """One judged comparison of a committed report, where it stands and its p-values."""

    report: str  # the folder under docs/results
    table: str  # verdicts, claims, interactions, effects, trends, sensitivity
    family: tuple  # the Holm family it was adjusted in
    experiment: str
    variant: str  # the config (or pair of configs) it compares in
    setting: str
    metric: str
    treatment: str
    baseline: str
    mean: float
    p: float  # the t-test's, unadjusted
    p_holm: float  # the report's own Holm p, over ``family``
    p_tost: float  # the TOST p of a tie, unadjusted
    p_tie: float  # the report's Holm p of the TOST, over ``family``
    verdict: str  # better, worse, tie, unresolved
    key: tuple  # the same test in another table has the same key

    def label(self) -> str:
        """A short name: report, table, comparison and where."""
        where = ", ".join(w for w in (_short(self.variant), self.setting) if w)
        where = f" ({where})" if where else ""
        return (
            f"{self.report} {self.table}: {self.treatment} − {self.baseline}{where}, {self.metric}"
        )


def _short(variant: str) -> str:
    """A config label without its key prefixes, a point of several keys named by its first
    ("model.d_model=48, model.layers=2" → "d_model=48"), a range or pair by both ends."""
    if variant.startswith("regret over lrs "):  # a sensitivity's lrs, by their ends
        lrs = variant.removeprefix("regret over lrs ").split(", ")
        return f"lrs {lrs[0]}–{lrs[-1]}"
    if "=" not in variant:  # a claim's measure
        return variant
    for joint in (" … ", " vs "):
        if joint in variant:
            return joint.join(_short(part) for part in variant.split(joint))
    return variant.replace("model.", "").replace("train.", "").split(",")[0].strip()


def _key(c: Any) -> tuple:
    """The test's identity: treatment, baseline and its per-seed differences scaled to unit
    length (a positive factor, nats to bits, is the same test). A trend over cells has no per-seed
    differences: its identity is its config range, its axis (the metric's words after the unit)
    and what a unit does not change, its p and its estimate over its interval's width."""
    if not c.differences:
        width = c.ci[1] - c.ci[0]
        ratio = c.mean / width if width else c.mean
        axis = c.metric.split(" ", 1)[-1]
        return (c.treatment, c.baseline, c.variant, axis, f"{c.p:.9g}", f"{ratio:.9g}")
    norm = math.sqrt(sum(d * d for d in c.differences)) or 1.0
    return (c.treatment, c.baseline, tuple(f"{d / norm:.9f}" for d in c.differences))


def _test(report: str, table: str, family: tuple, c: Any, variant: str | None = None) -> Test:
    from gelus.report.stats import EQUIVALENCE_MARGINS, tost_p

    margin = EQUIVALENCE_MARGINS.get(c.metric, 0.0)
    return Test(
        report, table, family, c.experiment, c.variant if variant is None else variant,
        c.setting, c.metric, c.treatment, c.baseline, c.mean, c.p, c.p_holm,
        tost_p(c.differences, margin) if margin else float("nan"), c.p_tie,
        str(c.verdict.name).lower(),
        _key(c),
    )  # fmt: skip


def tests_of(report: str, results: Sequence[Any]) -> list[Test]:
    """Every judged comparison of one report's :func:`~gelus.report.analysis.analyse` results,
    with the Holm family the report adjusted it in."""
    found = []
    for r in results:
        for c, _ in r.comparisons:  # one Holm family per config
            found.append(_test(report, "verdicts", (report, r.name, "verdicts", c.variant), c))
        for claim in r.claims:  # Holm within each claim
            family = (report, r.name, "claims", claim.claim)
            found += [_test(report, "claims", family, c, claim.measure) for c in claim.comparisons]
        for axis in r.axes:  # Holm over each table's comparisons of one metric
            for table, comparisons in (
                ("interactions", axis.comparisons),
                ("effects", axis.effects),
                ("trends", [t.comparison for t in axis.trends]),
            ):
                for c in comparisons:
                    # a trend's metric names its axis ("bpb gap per unit of log₂ tokens"): a
                    # factorial family's two slopes of one metric are one Holm family
                    metric = c.metric.split(" gap per unit of ")[0]
                    family = (report, r.name, table, axis.family.members, metric)
                    found.append(_test(report, table, family, c))
        if r.sensitivity is not None:  # Holm over the experiment's regret comparisons
            family = (report, r.name, "sensitivity")
            found += [
                _test(report, "sensitivity", family, c, c.lr) for c in r.sensitivity.comparisons
            ]
    return found


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini & Hochberg's (1995) step-up adjusted p-values: sorted ascending, the i-th of m
    (1-based) becomes min over j ≥ i of p_(j)·m/j, capped at 1; a test is rejected at false
    discovery rate q when its adjusted p ≤ q. NaN values are left out of m and stay NaN."""
    indexed = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    adjusted = [float("nan")] * len(pvalues)
    m, running = len(indexed), 1.0
    for rank in range(m - 1, -1, -1):
        p, i = indexed[rank]
        running = min(running, p * m / (rank + 1))
        adjusted[i] = running
    return adjusted


def family_mismatches(tests: Sequence[Test]) -> list[str]:
    """The families whose Holm over their p-values does not give the report's Holm p (the
    families were not recovered as the report formed them); [] when every one matches."""
    from gelus.report.stats import holm

    families: dict[tuple, list[Test]] = {}
    for t in tests:
        families.setdefault(t.family, []).append(t)
    wrong = []
    for family, members in families.items():
        again = holm([t.p for t in members])
        if any(
            not (math.isnan(a) and math.isnan(t.p_holm)) and abs(a - t.p_holm) > 1e-9
            for a, t in zip(again, members, strict=True)
        ):
            wrong.append(" / ".join(str(part) for part in family))
    return wrong


class Scope(NamedTuple):
    """Where claims are made: a document's table or section, and the tests it rests on."""

    name: str  # the README's table, or the RESULTS section's heading
    doc: str  # README.md or docs/RESULTS.md
    reports: tuple[str, ...]  # the committed reports under docs/results it cites
    keep: Callable[[Test], bool]  # which of their tests it rests on


def _per_config(*variants: str, setting: str | None = None) -> Callable[[Test], bool]:
    return lambda t: (
        t.table == "verdicts"
        and t.variant in variants
        and (setting is None or t.setting == setting)
    )


def _not_sensitivity(t: Test) -> bool:
    return t.table != "sensitivity"


SCOPES = (
    Scope("README.md's results table", "README.md",
          ("full", "transformer-lm", "transformer-vit", "transformer-scale"), _not_sensitivity),
    Scope("Results of the full protocol", "docs/RESULTS.md", ("full",),
          lambda t: _per_config("", "model.init=unit_norm")(t) or t.table == "claims"),
    Scope("Learning-rate sensitivity", "docs/RESULTS.md",
          ("full", "transformer-lm", "transformer-vit"), lambda t: t.table == "sensitivity"),
    Scope("The init claims", "docs/RESULTS.md", ("full",),
          lambda t: t.table in ("interactions", "effects")
          or (t.experiment == "mnist-classification" and _per_config(
              "model.init=unit_norm", "model.init=xavier", "model.init=he", setting="keep=1.0")(t))),
    Scope("Results of the transformer LM", "docs/RESULTS.md", ("transformer-lm",),
          _per_config("model.init=gpt2")),
    Scope("The init question in the transformer LM", "docs/RESULTS.md", ("transformer-lm",),
          lambda t: True),
    Scope("The transformer LM along model size", "docs/RESULTS.md", ("transformer-scale",),
          _not_sensitivity),
    Scope("Results of the transformer ViT", "docs/RESULTS.md", ("transformer-vit",),
          _per_config("")),
)  # fmt: skip


class Corrected(NamedTuple):
    """A scope's tests, each counted once, with Holm and BH over all of them."""

    scope: Scope
    occurrences: tuple[Test, ...]  # every table row it rests on
    unique: dict  # key -> the test (its first row)
    verdict: dict  # key -> its verdict, the most significant of its rows'
    families: int
    holm: dict  # key -> Holm-adjusted over the scope (the TOST p for a tie)
    bh: dict  # key -> BH-adjusted over the scope (the TOST p for a tie)

    @property
    def significant(self) -> list[tuple]:
        """The keys of the tests significant in their own Holm family, in the scope's order."""
        return [k for k in self.unique if self.verdict[k] in SIGNIFICANT]

    def survivors(self, method: str) -> list[tuple]:
        """The significant tests whose adjusted p over the scope (``holm`` or ``bh``) < ALPHA."""
        adjusted = self.holm if method == "holm" else self.bh
        return [k for k in self.significant if adjusted[k] < ALPHA]


def _rank(verdict: str) -> int:
    return {"better": 2, "worse": 2, "tie": 1}.get(verdict, 0)


def correct(scope: Scope, tests: Sequence[Test]) -> Corrected:
    """Holm and Benjamini–Hochberg over the scope's tests, each test counted once; a tie verdict
    is adjusted on its TOST p among the scope's TOST p-values."""
    from gelus.report.stats import holm

    kept = tuple(t for t in tests if t.report in scope.reports and scope.keep(t))
    unique: dict[tuple, Test] = {}
    verdict: dict[tuple, str] = {}
    for t in kept:
        unique.setdefault(t.key, t)
        if _rank(t.verdict) > _rank(verdict.get(t.key, "unresolved")):
            verdict[t.key] = t.verdict
        verdict.setdefault(t.key, t.verdict)
    keys = list(unique)
    adjusted = {}
    for method, adjust in (("holm", holm), ("bh", benjamini_hochberg)):
        on_p = dict(zip(keys, adjust([unique[k].p for k in keys]), strict=True))
        on_tost = dict(zip(keys, adjust([unique[k].p_tost for k in keys]), strict=True))
        adjusted[method] = {k: on_tost[k] if verdict[k] == "tie" else on_p[k] for k in keys}
    families = len({t.family for t in kept})
    return Corrected(scope, kept, unique, verdict, families, adjusted["holm"], adjusted["bh"])


def analysed(folder: Path) -> list[Any]:
    """The report analysis of ``folder/records.sqlite.gz`` (the committed records), as
    ``tools/regenerate_results.py`` reads them."""
    from gelus.report.analysis import analyse
    from gelus.report.sources import load, presets

    with tempfile.TemporaryDirectory() as scratch:
        with (
            gzip.open(folder / "records.sqlite.gz") as packed,
            open(Path(scratch) / "records.sqlite", "wb") as database,
        ):
            shutil.copyfileobj(packed, database)
        records, runs, _, step_times = load(scratch)
        return analyse(records, runs, presets(), step_times=step_times)


def every_test(results: Path = RESULTS) -> list[Test]:
    """Every judged comparison of the committed reports the scopes cite, regenerated from their
    records; a family that Holm does not reproduce is an error."""
    names = dict.fromkeys(name for scope in SCOPES for name in scope.reports)
    tests = [t for name in names for t in tests_of(name, analysed(results / name))]
    wrong = family_mismatches(tests)
    if wrong:
        raise ValueError(
            "these families were not recovered as the report forms them (Holm over them does "
            f"not give the report's Holm p); update tests_of: {'; '.join(wrong)}"
        )
    return tests


class Quote(NamedTuple):
    """A significant verdict README.md's table states: the words (a regular expression) after
    which its mark stands, and the tests it rests on (``needs``: ``all`` of them must survive
    for the mark, or ``any``: a claim contradicted by one test)."""

    words: str
    keep: Callable[[Test], bool]
    needs: str = "all"


def _is(table: str, treatment: str | tuple, baseline: str | None = None, **where: str):
    treatments = (treatment,) if isinstance(treatment, str) else treatment
    return lambda t: (
        t.table == table and t.treatment in treatments
        and (baseline is None or t.baseline == baseline)
        and all(str(getattr(t, k)).startswith(v) for k, v in where.items())
    )  # fmt: skip


QUOTES = (
    Quote(r"Better than ReLU with dropout 0\.5 \(Holm p = [\d.]+\)",
          _is("verdicts", "gelu", "relu", variant="model.init=unit_norm", setting="keep=0.5")),
    Quote(r"the paper's noise-robustness claim is contradicted for ReLU",
          _is("claims", "gelu", "relu", metric="error·a")),
    Quote(r'and its "SiLU worse than GELU" too', _is("claims", "silu", "gelu"), "any"),
    Quote(r"\(GELU \+[\d.]+ pp against Xavier, SiLU \+[\d.]+, ELU \+[\d.]+; Holm p ≤ [\d.]+\)",
          _is("effects", ("gelu", "silu", "elu"), metric="error",
              variant="model.init=xavier vs model.init=he")),
    Quote(r"and lowers ReLU's",
          _is("effects", "relu", metric="error", variant="model.init=xavier vs model.init=he")),
    Quote(r"squared ReLU and GEGLU beat it \(Holm p = [\d.]+ each\)",
          _is("verdicts", ("relu2", "geglu"), "gelu", variant="model.init=gpt2")),
    Quote(r"under PyTorch's init ReLU becomes worse than GELU \([^)]*\)",
          _is("verdicts", "relu", "gelu", variant="model.init=torch")),
    Quote(r"and squared ReLU stays better", _is("verdicts", "relu2", "gelu", variant="model.init=")),
    Quote(r"ReLU itself loses [\d.]+ under PyTorch's init \(p [\d.]+\)",
          _is("effects", "relu", variant="model.init=torch vs model.init=gpt2")),
    Quote(r"by [\d.]+–[\d.]+ points of test error \(Holm p ≤ [\d.]+\)",
          _is("verdicts", ("relu2", "geglu", "swiglu"), "gelu", report="transformer-vit")),
    Quote(r"squared ReLU's gap to GELU moves in its favour along both axes",
          _is("trends", "relu2", "gelu", verdict="better")),  # the factorial's two slopes
    Quote(r"ReLU is the one hurt without it \(\+[\d.]+ at d 80, Holm p [\d.]+\)",
          _is("effects", "relu", variant="optim.warmup=0 vs optim.warmup=0.05", verdict="worse")),
)  # fmt: skip


def mark(corrected: Corrected, quote: Quote) -> tuple[str, list[Test]]:
    """The mark a quoted verdict gets (HOLM_MARK when its tests survive Holm over the scope,
    BH_MARK when they survive BH, "" else) and the tests it rests on; an error when it rests on
    none, or on one not significant in its own family."""
    keys = list(dict.fromkeys(t.key for t in corrected.occurrences if quote.keep(t)))
    if not keys:
        raise ValueError(f"README.md's words {quote.words!r} rest on no test of the table's")
    weak = [corrected.unique[k].label() for k in keys if corrected.verdict[k] not in SIGNIFICANT]
    if weak:
        raise ValueError(f"{quote.words!r} quotes tests not significant in their family: {weak}")
    combine = all if quote.needs == "all" else any
    for symbol, adjusted in ((HOLM_MARK, corrected.holm), (BH_MARK, corrected.bh)):
        if combine(adjusted[k] < ALPHA for k in keys):
            return symbol, [corrected.unique[k] for k in keys]
    return "", [corrected.unique[k] for k in keys]


def _brief(t: Test) -> str:
    """The test in a sentence: the comparison, its table (a sensitivity's experiment), where."""
    table = t.experiment if t.table == "sensitivity" else "" if t.table == "verdicts" else t.table
    where = ", ".join(w for w in (table, _short(t.variant), t.setting) if w)
    return f"{t.treatment} − {t.baseline}" + (f" ({where})" if where else "")


def _which(c: Corrected, method: str) -> str:
    """The survivors of ``method`` over the scope in words: none, all, all but a few, or a few."""
    kept, significant = c.survivors(method), c.significant
    lost = [k for k in significant if k not in kept]
    if not kept:
        return "none"
    if not lost:
        return f"all {len(kept)}"
    if min(len(kept), len(lost)) > 4:
        return str(len(kept))
    if len(kept) <= len(lost):
        return f"{len(kept)}: {'; '.join(_brief(c.unique[k]) for k in kept)}"
    return f"{len(kept)}, all but {'; '.join(_brief(c.unique[k]) for k in lost)}"


def sentence(c: Corrected) -> str:
    """What the scope's document says of its multiplicity (README.md: the table's; a RESULTS
    section: its own)."""
    n, significant = len(c.unique), len(c.significant)
    rows = "" if len(c.occurrences) == n else f", {len(c.occurrences)} table rows"
    families = f"{c.families} Holm {'family' if c.families == 1 else 'families'}{rows}"
    if c.scope.doc == "README.md":  # the table's cells are short: the counts, the list elsewhere
        bh, holm = len(c.survivors("bh")), len(c.survivors("holm"))
        return (
            f"The table's verdicts rest on {n} tests ({families}); {significant} are significant "
            f"in their own family; over all {n}, Benjamini–Hochberg at q {ALPHA:g} keeps {bh} of "
            f"them and Holm {holm}."
        )
    return (
        f"This section's claims rest on {n} tests ({families}); {significant} are significant in "
        f"their own family; over all {n}, Benjamini–Hochberg at q {ALPHA:g} keeps "
        f"{_which(c, 'bh')} and Holm keeps {_which(c, 'holm')}."
    )


def _p(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3g}"


def _counts(corrected: Sequence[Corrected]) -> list[str]:
    lines = [
        "| scope | document | tests | table rows | Holm families | significant in their "
        "family | BH (q 0.05) over the scope keeps | Holm over the scope keeps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in corrected:
        lines.append(
            f"| {c.scope.name} | {c.scope.doc} | {len(c.unique)} | {len(c.occurrences)} | "
            f"{c.families} | {len(c.significant)} | {len(c.survivors('bh'))} | "
            f"{len(c.survivors('holm'))} |"
        )
    return lines


def _marks(table: Corrected) -> list[str]:
    lines = [
        f"| README.md's words (a regular expression) | tests | Holm over {len(table.unique)} | "
        f"BH over {len(table.unique)} | mark |",
        "|---|---|---|---|---|",
    ]
    for quote in QUOTES:
        symbol, tests = mark(table, quote)
        holm = ", ".join(_p(table.holm[t.key]) for t in tests)
        bh = ", ".join(_p(table.bh[t.key]) for t in tests)
        names = "; ".join(t.label() for t in tests) + ("" if quote.needs == "all" else " (any)")
        lines.append(f"| `{quote.words}` | {names} | {holm} | {bh} | {symbol or 'none'} |")
    return lines


def _verdicts(c: Corrected) -> list[str]:
    lines = [
        f"### {c.scope.name}",
        "",
        "| test | verdict | p | Holm p in its family | Holm p over the scope | BH p over the "
        "scope | survives |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in c.significant:
        t = c.unique[k]
        survives = "Holm and BH" if c.holm[k] < ALPHA else "BH" if c.bh[k] < ALPHA else "neither"
        tie = c.verdict[k] == "tie"
        p = _p(t.p_tost) + " (TOST)" if tie else _p(t.p)
        family = min((o.p_tie if tie else o.p_holm) for o in c.occurrences if o.key == k)
        lines.append(
            f"| {t.label()} | {c.verdict[k]} | {p} | {_p(family)} | {_p(c.holm[k])} | "
            f"{_p(c.bh[k])} | {survives} |"
        )
    return lines


HEAD = """# Multiplicity where the claims are made

Written by `python tools/table_multiplicity.py` from the committed records
(`docs/results/*/records.sqlite.gz`), through the report's own analysis; the policy is
docs/REPORT.md's ("Multiplicity where the claims are made"). A scope is where claims are made:
README.md's results table, or a section of docs/RESULTS.md. Its tests are counted once each (a
test shown in two tables, such as bits per byte beside nats, is one test); Holm (family-wise) and
Benjamini–Hochberg (false discovery rate, q 0.05) are applied over all of them.
`tests/report/test_multiplicity.py` checks that the documents say the sentences below and carry
the marks, and that this file is what the records give."""


def render(corrected: Sequence[Corrected]) -> str:
    """``docs/results/multiplicity.md``: the counts, the sentences, the README's marks and every
    significant verdict of each scope with its p-values."""
    table = next(c for c in corrected if c.scope.doc == "README.md")
    lines = [HEAD, "", "## Counts", "", *_counts(corrected), "", "## The sentences", ""]
    lines += [f"- {c.scope.doc} ({c.scope.name}): {sentence(c)}" for c in corrected]
    lines += ["", "## README.md's marks", "", f"{HOLM_MARK}: survives Holm over the table's "
              f"tests (and so BH); {BH_MARK}: survives BH only; none: neither.", "", *_marks(table)]  # fmt: skip
    lines += ["", "## The significant verdicts of each scope"]
    for c in corrected:
        lines += ["", *_verdicts(c)]
    return "\n".join(lines) + "\n"


def sentences(text: str) -> list[tuple[str, str, str]]:
    """(document, scope, sentence) of each line of a written list's "The sentences"."""
    body = text.split("## The sentences", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in body.splitlines():
        if line.startswith("- "):
            head, said = line[2:].split("): ", 1)
            doc, scope = head.split(" (", 1)
            found.append((doc, scope, said))
    return found


def marks(text: str) -> list[tuple[str, str]]:
    """(regular expression, mark: HOLM_MARK, BH_MARK or "") of each row of "README.md's marks"."""
    body = text.split("## README.md's marks", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in body.splitlines():
        if line.startswith("| `"):
            words = line[3:].split("` | ", 1)[0]
            symbol = line.rstrip(" |").rsplit("| ", 1)[1]
            found.append((words, "" if symbol == "none" else symbol))
    return found


def compute(results: Path = RESULTS) -> list[Corrected]:
    """Every scope corrected over its tests, from the committed records."""
    tests = every_test(results)
    return [correct(scope, tests) for scope in SCOPES]


def main(argv: Sequence[str] | None = None) -> int:
    """Print each scope's sentence and write the list (unless ``--print-only``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--print-only", action="store_true", help="write no file")
    args = parser.parse_args(argv)
    corrected = compute()
    text = render(corrected)
    print("\n".join(_counts(corrected)), end="\n\n")
    for c in corrected:
        print(f"{c.scope.doc} ({c.scope.name}):\n  {sentence(c)}")
    table = next(c for c in corrected if c.scope.doc == "README.md")
    print("\nREADME.md's marks:")
    for quote in QUOTES:
        print(f"  {mark(table, quote)[0] or 'none':4s} after {quote.words}")
    if not args.print_only:
        LIST.write_text(text, encoding="utf-8")
        print(f"\nwrote {LIST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
