"""Nothing moves but the form: every committed report, regenerated in the report's new form
(picture first, wrapped for a terminal), still holds every table row and every number of the
report committed before that change, from the same records (columns added since, the rows' other
cells in order).

The old reports are read from git at :data:`BEFORE`, the last commit with the old form. A folder
whose records changed since then is skipped (its numbers may rightly move); without git history
the test is skipped.
"""

import re
import subprocess
from pathlib import Path

import pytest

from gelus.report.render import unwrapped

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
BEFORE = "968920a888b2"  # the last commit whose committed reports have the old form
FOLDERS = sorted(p.name for p in RESULTS.iterdir() if (p / "records.sqlite.gz").is_file())
# a number as the report writes it: sign, digits with thousands commas, decimals, exponent, unit
NUMBER = re.compile(r"[+−-]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?(?: ?(?:%|pp|×))?")


def _old(path: str, binary: bool = False):
    found = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"], capture_output=True, check=False
    )
    if found.returncode != 0:
        pytest.skip(f"git history at {BEFORE} is not here: {found.stderr.decode()[:200]}")
    return found.stdout if binary else found.stdout.decode("utf-8")


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split(" | ")]


def _in_order(cells: list[str], row: list[str]) -> bool:
    """True when every one of ``cells`` is a cell of ``row``, in the same order."""
    rest = iter(row)
    return all(any(cell == other for other in rest) for cell in cells)


def _numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


@pytest.mark.parametrize("name", FOLDERS)
def test_every_row_and_number_of_the_old_report_is_in_the_new_one(name):
    folder = RESULTS / name
    if (
        _old(f"docs/results/{name}/records.sqlite.gz", binary=True)
        != (folder / "records.sqlite.gz").read_bytes()
    ):
        pytest.skip(f"{name}'s records changed since {BEFORE}: its numbers may rightly move")
    old = _old(f"docs/results/{name}/report.md")
    new = unwrapped((folder / "report.md").read_text(encoding="utf-8"))
    lines = old.splitlines()
    rows = [  # every data row of the old tables (a heading row is followed by |---|)
        line
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if line.startswith("| ") and not after.startswith("|---")
    ]
    assert len(rows) > 20  # the old report's tables: results, differences, setup, claims …
    # a row is kept when it is there whole, or when its cells but the last (the verdict in words,
    # which issue 45 extended with the lr-choice and one-seed-out notes) appear in order in one new
    # row (issue 45 added columns: the range with one seed left out, the lr of each row)
    new_rows = [_cells(line) for line in new.splitlines() if line.startswith("| ")]
    missing = [
        row
        for row in rows
        if row not in new and not any(_in_order(_cells(row)[:-1], n) for n in new_rows)
    ]
    assert not missing, (
        f"{len(missing)} of {len(rows)} old rows are not in the new report: {missing[:3]}"
    )
    lost = _numbers(old) - _numbers(new)
    assert not lost, f"numbers of the old report not in the new one: {sorted(lost)[:20]}"
    # and the new report is really in the new form (else this test compares a file to itself)
    assert "## Verdicts at a glance" in new and "## Verdicts at a glance" not in old
