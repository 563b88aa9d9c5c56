"""Multiplicity where the claims are made (docs/REPORT.md): README.md's results table and each
docs/RESULTS.md section say how many tests they rest on and which of their verdicts survive a
correction over all of them. tools/table_multiplicity.py writes docs/results/multiplicity.md from
the committed records; here the documents must say what that list says (fast), and the list must
be what the records give (slow: it regenerates every committed report's analysis)."""

import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location(
        "table_multiplicity", ROOT / "tools" / "table_multiplicity.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
LIST = TOOL.LIST.read_text(encoding="utf-8")


def _flat(text: str) -> str:
    """Whitespace collapsed: a sentence may be wrapped anywhere in a document."""
    return " ".join(text.split())


def test_benjamini_hochberg_against_scipy():
    from scipy.stats import false_discovery_control

    rng = np.random.default_rng(45)
    for m in (1, 2, 7, 40):
        p = np.concatenate([rng.uniform(0, 0.02, m // 3), rng.uniform(0, 1, m - m // 3)])
        p[: m // 4] = p[0]  # ties among the p-values
        np.testing.assert_allclose(TOOL.benjamini_hochberg(list(p)), false_discovery_control(p))
    adjusted = TOOL.benjamini_hochberg([0.01, math.nan, 0.04])
    # m = 2, the NaN left out: 0.04·2/2, then min(0.04, 0.01·2/1)
    assert math.isnan(adjusted[1]) and adjusted[0] == pytest.approx(0.02) and adjusted[2] == 0.04


def _test(key, p, family, verdict="better", p_tost=math.nan):
    return TOOL.Test(
        "r", "verdicts", family, "e", "", "", "loss", "a", "b", 0.0, p, p, p_tost, p, verdict, key
    )


def test_a_test_shown_twice_counts_once_and_both_corrections_apply():
    scope = TOOL.Scope("s", "README.md", ("r",), lambda t: True)
    tests = [
        _test("x", 0.001, "F1", p_tost=0.9),
        _test("y", 0.02, "F1", p_tost=0.5),
        _test("x", 0.001, "F2", verdict="unresolved", p_tost=0.9),  # in another family
        _test("z", 0.3, "F2", verdict="unresolved", p_tost=0.2),
        _test("w", 0.6, "F3", verdict="tie", p_tost=0.004),
    ]
    c = TOOL.correct(scope, tests)
    assert len(c.unique) == 4 and len(c.occurrences) == 5 and c.families == 3
    assert c.verdict["x"] == "better"  # its most significant row's
    # by hand, m = 4: Holm 0.001·4, 0.02·3; BH 0.001·4/1, 0.02·4/2; the tie on the TOST ps
    assert c.holm["x"] == pytest.approx(0.004) and c.holm["y"] == pytest.approx(0.06)
    assert c.bh["x"] == pytest.approx(0.004) and c.bh["y"] == pytest.approx(0.04)
    assert c.holm["w"] == pytest.approx(0.016) and c.bh["w"] == pytest.approx(0.016)
    assert c.significant == ["x", "y", "w"]
    assert c.survivors("holm") == ["x", "w"] and c.survivors("bh") == ["x", "y", "w"]


def test_the_same_differences_in_other_units_are_the_same_test():
    class C:
        treatment, baseline = "relu", "gelu"

        def __init__(self, differences):
            self.differences = differences

    nats = (0.031, -0.012, 0.047, 0.005, 0.022)
    bits = tuple(d / math.log(2) for d in nats)
    assert TOOL._key(C(nats)) == TOOL._key(C(bits))
    assert TOOL._key(C(nats)) != TOOL._key(C((*nats[:4], 0.006)))
    assert TOOL._key(C(nats)) != TOOL._key(C(tuple(-d for d in nats)))


def test_a_trend_in_other_units_is_the_same_test_and_another_axis_is_not():
    class Slope:  # a trend over cells: no per-seed differences
        treatment, baseline, variant, differences = "relu2", "gelu", "d 48 … d 128", ()

        def __init__(self, metric, mean, half, p):
            self.metric, self.mean, self.ci, self.p = metric, mean, (mean - half, mean + half), p

    bits = Slope("bpb gap per unit of log₂ parameters", -0.068, 0.04, 0.0106)
    nats = Slope(
        "loss gap per unit of log₂ parameters", -0.068 * math.log(2), 0.04 * math.log(2), 0.0106
    )
    tokens = Slope("bpb gap per unit of log₂ tokens", -0.068, 0.04, 0.0106)
    other = Slope("bpb gap per unit of log₂ parameters", -0.05, 0.04, 0.0106)
    assert TOOL._key(bits) == TOOL._key(nats)
    assert len({TOOL._key(s) for s in (bits, tokens, other)}) == 3


def test_every_scope_has_its_sentence_and_the_documents_say_it():
    said = TOOL.sentences(LIST)
    assert [scope for _, scope, _ in said] == [s.name for s in TOOL.SCOPES]
    for doc, scope, sentence in said:
        text = _flat((ROOT / doc).read_text(encoding="utf-8"))
        assert _flat(sentence) in text, f"{doc} ({scope}) does not say: {sentence}"


def test_the_readme_marks_each_quoted_verdict_as_the_list_says():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = TOOL.marks(LIST)
    assert len(found) == len(TOOL.QUOTES)
    for words, symbol in found:
        match = re.search(f"({words})( [{TOOL.HOLM_MARK}{TOOL.BH_MARK}])?", readme)
        assert match, f"README.md no longer says {words!r}: update tools/table_multiplicity.py"
        assert (match.group(2) or "").strip() == symbol, (words, symbol)
    for symbol in (TOOL.HOLM_MARK, TOOL.BH_MARK):  # no mark the list does not give (+ legend)
        table = readme.split("## What the results say", 1)[1].split("\n## ", 1)[0]
        marked = len(re.findall(f"{symbol}(?!:)", table))
        assert marked == sum(s == symbol for _, s in found), symbol


@pytest.mark.slow
def test_the_list_is_what_the_committed_records_give(monkeypatch):
    # the pairs an unresolved verdict would need enter no p-value, family or verdict, and the
    # list reads none: not computing them takes this from minutes to seconds
    import gelus.report.stats

    monkeypatch.setattr(gelus.report.stats, "pairs_for_holm_power", lambda *args: None)
    assert TOOL.render(TOOL.compute()) == LIST
