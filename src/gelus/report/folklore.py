"""The seed documents' claims about training with GELU, judged from the report's axis families
(:mod:`gelus.report.axes`) by the rules docs/REPORT.md wrote down before the runs ("The folklore:
what would answer each claim"): each claim's sentence names the comparisons it rests on and says
supported, refuted or not settled, nothing more.
"""

from gelus.experiments.config import plugins
from gelus.report.axes import FACTORIAL_AXES, AxisResult
from gelus.report.axes_figure import base_metric
from gelus.report.stats import Comparison

__all__ = ["init_claims", "scale_claim", "warmup_claim"]


def _word(c: Comparison) -> str:
    return c.verdict.word


def _facing(c: Comparison, value: str) -> tuple[str, str]:
    """(the other value, the verdict word) of a comparison between two values of an axis, turned
    so that it reads for ``value`` against the other ("init=xavier vs init=he")."""
    first, _, second = c.variant.partition(" vs ")
    if first == value:
        return second, c.verdict.word
    return first, c.verdict.flipped().word


def _rule_note(comparisons) -> str:
    """A sentence naming the comparisons a claim rests on whose verdict another lr-selection rule
    changes (``Comparison.depends``), each rule's word; "" where every rule agrees."""
    moved = [c for c in comparisons if c.depends]
    if not moved:
        return ""
    said = "; ".join(f"{c.treatment}, {c.variant}: {c.depends}" for c in moved)
    return f" Not every lr-selection rule agrees ({said})."


def _lr_choice_note(comparisons) -> str:
    """A sentence naming the comparisons a claim rests on whose verdict the matched lr or the
    mean rule changes (``Comparison.lr_choice``, :mod:`gelus.report.lr_choice`), each one's
    word; "" where they agree."""
    moved = [c for c in comparisons if c.lr_choice]
    if not moved:
        return ""
    said = "; ".join(f"{c.treatment}: {c.lr_choice}" for c in moved)
    return f" Not every lr choice agrees ({said})."


def _headline(comparisons) -> list[Comparison]:
    """The comparisons of the first metric among them (the protocol's headline)."""
    return [c for c in comparisons if c.metric == comparisons[0].metric] if comparisons else []


def _xavier_claim(result: AxisResult, xavier: str) -> str | None:
    """'Xavier/Glorot: standard initialization works well' for GELU: GELU under xavier against
    GELU under each other init; supported when it is no worse than any (tie or ▲ better) and no
    GELU run diverged, refuted when it is ▼ worse than one or a run diverged, else not settled."""
    mine = [c for c in _headline(result.effects) if c.treatment == "gelu" and xavier in c.variant]
    if not mine:
        return None
    facing = [_facing(c, xavier) for c in mine]
    said = "; ".join(f"against {other}: {word}" for other, word in facing)
    diverged = sum(c.diverged for c in mine)
    if diverged or any(word == "worse" for _, word in facing):
        verdict = "refuted"
    elif all(word in ("tie", "better") for _, word in facing):
        verdict = "supported"
    else:
        verdict = "not settled"
    runs = f"; {diverged} pairs with a diverged run" if diverged else ""
    return (
        'The seed documents\' claim that Xavier/Glorot initialization "works well" for GELU '
        f"(GELU under {xavier}, test {mine[0].metric}; {said}{runs}): {verdict}." + _rule_note(mine)
    )


def _he_claim(result: AxisResult, he: str, xavier: str) -> str | None:
    """'He initialization: may be too aggressive for GELU': per alternative a, the interaction
    of (a − GELU) between he and xavier; supported where a gains on GELU under he (▲ better for a
    read he against xavier), refuted where the gap is a tie or moves the other way."""
    pair = {he, xavier}
    mine = [
        c for c in _headline(result.comparisons)
        if c.baseline == "gelu" and set(c.variant.split(" vs ")) == pair
    ]  # fmt: skip
    if not mine:
        return None
    said = []
    for c in mine:
        word = _facing(c, he)[1]
        verdict = {"better": "supported", "tie": "refuted", "worse": "refuted"}.get(word)
        said.append(f"{c.treatment}: {verdict or 'not settled'} ({word})")
    return (
        'The seed documents\' claim that He initialization "may be too aggressive for GELU" '
        f"(each activation's gap to GELU under {he} against under {xavier}, test "
        f"{mine[0].metric}): " + "; ".join(said) + "." + _rule_note(mine)
    )


def _init_dependence(result: AxisResult) -> str | None:
    """'A verdict about an activation can be a verdict about the init': each activation's
    interaction with GELU between each pair of inits on the headline metric; supported where one
    is significant (its gap to GELU moves with the init beyond chance), refuted when every one is
    a tie (moves by less than the margin), else not settled."""
    mine = [c for c in _headline(result.comparisons) if c.baseline == "gelu"]
    if not mine:
        return None
    moved = [c for c in mine if _word(c) in ("better", "worse")]
    if moved:
        verdict = "supported (" + "; ".join(f"{c.treatment}: {c.variant}" for c in moved) + ")"
    elif all(_word(c) == "tie" for c in mine):
        verdict = "refuted"
    else:
        verdict = "not settled"
    said = "; ".join(f"{c.treatment}, {c.variant}: {_word(c)}" for c in mine)
    return (
        "Whether a verdict about an activation is partly a verdict about the init (each "
        f"activation's gap to GELU under one init against under another, test {mine[0].metric}; "
        f"{said}): {verdict}." + _rule_note(mine)
    )


def init_claims(result: AxisResult) -> list[str]:
    """The init claims a family of configs along an engine's init key (``EnginePlugin.init_key``)
    can judge, against GELU: Xavier's (where xavier is a value), He's (where he and xavier both
    are), and whether an activation's verdict moves with the init (any two inits)."""
    init_keys = {(p.init_key,) for p in plugins() if p.init_key is not None}
    if result.family.keys not in init_keys:
        return []
    values = {label.partition("=")[2]: label for label in result.family.labels}
    found = [_xavier_claim(result, values["xavier"])] if "xavier" in values else []
    if "xavier" in values and "he" in values:
        found.append(_he_claim(result, values["he"], values["xavier"]))
    found.append(_init_dependence(result))
    return [text for text in found if text]


def _is_pair(c: Comparison, values: set[str]) -> bool:
    """True when ``c`` compares exactly these two values of an axis ("a vs b", either order)."""
    return set(c.variant.split(" vs ")) == values


def warmup_claim(result: AxisResult) -> str | None:
    """'GELU often benefits from learning rate warmup', judged as docs/REPORT.md fixed: GELU with
    warmup (the larger fraction) against GELU without (the smaller), paired by seed: supported when
    ▲ better, refuted when a tie or ▼ worse, else not settled; "GELU in particular" only against an
    activation whose interaction shows GELU gaining more (its gap to GELU moves toward GELU with
    warmup: ▼ worse for it), a gain shared (interaction a tie) supports warmup, not a GELU
    property. None where the family is not one along an engine's warmup key
    (``EnginePlugin.warmup_key``) with GELU in it."""
    if result.family.keys not in {(p.warmup_key,) for p in plugins() if p.warmup_key}:
        return None
    values = sorted(result.family.labels, key=lambda label: float(label.partition("=")[2]))
    without, warm = values[0], values[-1]
    between = {without, warm}
    mine = [c for c in _headline(result.effects) if _is_pair(c, between) and c.treatment == "gelu"]
    if not mine:
        return None
    word = _facing(mine[0], warm)[1]
    verdict = {"better": "supported", "tie": "refuted", "worse": "refuted"}.get(word, "not settled")
    pairs = [
        c for c in _headline(result.comparisons) if _is_pair(c, between) and c.baseline == "gelu"
    ]
    faced = [(c.treatment, _facing(c, warm)[1]) for c in pairs]
    particular = [a for a, w in faced if w == "worse"]
    shared = [a for a, w in faced if w in ("tie", "better", "unresolved")]
    said = "; ".join(f"{a}: {w}" for a, w in faced) or "none ran"
    if verdict == "supported":
        verdict += (
            f", for GELU in particular against {', '.join(particular)}"
            if particular
            else " as a benefit of warmup, not shown to be GELU's in particular"
        ) + (f" (not against {', '.join(shared)})" if particular and shared else "")
    return (
        'The seed documents\' claim that GELU "often benefits from learning rate warmup" (GELU '
        f"under {warm} against under {without}, test {mine[0].metric}: {word}; each "
        f"activation's gap to GELU under {warm} against under {without}: {said}): "
        f"{verdict}." + _rule_note([*mine, *pairs])
    )


SCALE_CLAIM = "more pronounced in larger models"  # the seed documents, of GELU's benefits


def _named(trends) -> dict[str, list[str]]:
    """The treatments of ``trends`` by their verdict word (worse, better, unresolved)."""
    named: dict[str, list[str]] = {word: [] for word in ("worse", "better", "unresolved")}
    for t in trends:
        named.get(t.comparison.verdict.word, named["unresolved"]).append(t.comparison.treatment)
    return named


def _span(result: AxisResult) -> float:
    """How many times the largest N of the family is the smallest."""
    if result.family.kind == "factorial":
        logs = [n for n, _ in result.family.points]
        return 2.0 ** (max(logs) - min(logs))
    return result.family.sizes[-1] / result.family.sizes[0]


def _length_note(result: AxisResult, headline_metric: str) -> str:
    """A factorial family's other axis in words: each activation's slope per doubling of the
    training tokens T, which the claim does not name but the same fit separates from N's."""
    if result.family.kind != "factorial":
        return ""
    tokens = f"{headline_metric} gap per unit of {FACTORIAL_AXES[1]}"
    named = _named([t for t in result.trends if t.comparison.metric == tokens])
    parts = [
        f"toward GELU for {', '.join(named['worse'])}" * bool(named["worse"]),
        f"in favour of {', '.join(named['better'])}" * bool(named["better"]),
        f"unresolved for {', '.join(named['unresolved'])}" * bool(named["unresolved"]),
    ]
    return (
        " Along training length, in the same fit (N held fixed), the gap moves "
        + "; ".join(part for part in parts if part)
        + "."
    )


def scale_claim(result: AxisResult) -> str | None:
    """The seed documents' claim that GELU's benefits are "more pronounced in larger models",
    judged by a scale family's trends (a factorial family's slopes per doubling of N, with the
    training length held fixed by the fit) on its headline metric: supported by an activation
    whose gap to GELU moves toward GELU as N grows (▼ worse), contradicted by one whose gap moves
    in its own favour (▲ better), unresolved otherwise; a factorial family also says what its
    slopes per doubling of T do. None where the family is neither against GELU."""
    if result.family.kind not in ("scale", "factorial") or not result.trends:
        return None
    headline = result.trends[0].comparison.metric  # a factorial's first slope is N's
    trends = [t for t in result.trends if t.comparison.metric == headline]
    if trends[0].comparison.baseline != "gelu":
        return None
    named = _named(trends)
    parts = [
        f"supported against {', '.join(named['worse'])} (the gap moves toward GELU as N grows)"
        * bool(named["worse"]),
        f"contradicted by {', '.join(named['better'])} (the gap moves in their favour)"
        * bool(named["better"]),
        f"unresolved against {', '.join(named['unresolved'])}" * bool(named["unresolved"]),
    ]
    budgets = "at these budgets" if result.family.kind == "scale" else "with training length apart"
    return (
        f"The seed documents' claim that GELU's benefits are \"{SCALE_CLAIM}\", over "
        f"{_span(result):.0f}× in parameters {budgets} "
        f"(test {base_metric(trends[0])}): "
        + "; ".join(part for part in parts if part)
        + "."
        + _length_note(result, headline.split(" gap per unit of ")[0])
        + _rule_note([t.comparison for t in trends])
        + _lr_choice_note([t.comparison for t in trends])
    )
