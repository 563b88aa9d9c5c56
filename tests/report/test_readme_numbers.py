"""The README's results table quotes the committed reports (the glance table's columns: verdict,
comparison, difference, one seed left out, p (Holm), marks): each number it gives is read here
from the report it comes from (docs/results/*/report.md) and must appear, at the README's
precision, in the README's sentence. A regenerated report whose number moves fails this test
until the README says the new number."""

import re
from pathlib import Path

import pytest

from gelus.report.render import unwrapped

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _report(name: str) -> str:
    return unwrapped((ROOT / "docs" / "results" / name / "report.md").read_text(encoding="utf-8"))


def _cells(md: str, start: str) -> list[str]:
    """The cells of the first table row that starts with ``start``."""
    row = next((line for line in md.splitlines() if line.startswith(start)), None)
    assert row is not None, f"no row starting {start!r}"
    return [cell.strip() for cell in row.strip("|").split(" | ")]


def _number(text: str) -> float:
    return float(text.replace("pp", "").strip())


def test_gelu_better_than_relu_with_dropout():
    p = _cells(_report("full"), "| ▲ better | gelu − relu, model.init=unit_norm, keep=0.5 |")[4]
    assert f"Better than ReLU with dropout 0.5 (Holm p = {p})" in README


@pytest.mark.parametrize(
    ("activation", "name"), [("gelu", "GELU"), ("silu", "SiLU"), ("elu", "ELU")]
)
def test_he_raises_the_test_error_of_every_smooth_activation(activation, name):
    found = re.search(
        rf"{activation} \(test error, keep=1\.0\) under model\.init=xavier is better than under "
        r"model\.init=he: -(\d+\.\d\d) pp",
        _report("full"),
    )
    assert found, activation
    quoted = f"{name} +{found.group(1)}" + (" pp against Xavier" if name == "GELU" else "")
    assert quoted in README


def test_the_lm_verdicts():
    lm = _report("transformer-lm")
    ps = [_cells(lm, f"| ▲ better | {a} − gelu, model.init=gpt2 |")[4] for a in ("relu2", "geglu")]
    assert len(set(ps)) == 1
    assert f"squared ReLU and GEGLU beat it (Holm p = {float(ps[0]):.2g} each)" in README
    _, _, effect, _, p, _ = _cells(lm, "| ▼ worse | relu − gelu, model.init=torch |")
    assert f"{_number(effect.split()[0]):+.3f} bits per byte, Holm p {p}" in README
    cells = _cells(lm, "| relu | model.init=torch vs model.init=gpt2 | — | test bpb |")
    loss, p_holm = _number(cells[5]), cells[9]
    assert f"ReLU itself loses {loss:.3f} under PyTorch's init (p {p_holm})" in README


def test_the_vit_verdicts():
    vit = _report("transformer-vit")
    rows = [_cells(vit, f"| ▲ better | {a} − gelu |") for a in ("relu2", "geglu", "swiglu")]
    sizes = [abs(_number(row[2].split(" \\[")[0])) for row in rows]
    worst_p = max(float(row[4]) for row in rows)
    quoted = f"by {min(sizes):.1f}–{max(sizes):.1f} points of test error (Holm p ≤ {worst_p:.3f})"
    assert quoted in README


def test_the_scale_and_training_length_slopes():
    report = _report("transformer-scale")
    slopes = [
        _cells(report, f"| relu2 | — | test bpb | per doubling of {axis} | 7 | 5 |")
        for axis in ("N", "T")
    ]
    n, t = (_number(row[6]) for row in slopes)
    p_holm = {row[10] for row in slopes}
    assert len(p_holm) == 1  # the README says "each"
    quoted = f"{n:+.3f} bits per byte per doubling of N and {t:+.3f} per doubling of T"
    assert quoted.replace("-", "−") in README
    assert f"(Holm p {p_holm.pop()} each)" in README
