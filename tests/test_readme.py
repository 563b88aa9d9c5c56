"""Every ```python block of README.md runs as written: each in its own Python process, in a
temporary directory, with a timeout. A block that cannot run here (it needs data, a GPU, the
network) is marked in README.md by the HTML comment ``<!-- readme-test: skip (the reason) -->``
on the line before it, and is skipped with that reason; a marker without a reason is an error."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TIMEOUT_S = 240  # one block, under a loaded machine; a block hanging fails, it does not stall
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*(?:\((?P<reason>[^)]*)\))?\s*-->")
FENCE = re.compile(r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)


class Block:
    def __init__(self, line: int, code: str, skip: str | None) -> None:
        self.line, self.code, self.skip = line, code, skip


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of ``text``: first line number, code, and the skip reason (or None)."""
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = SKIP.search(before)
        reason = None
        if marker:
            reason = (marker.group("reason") or "").strip()
            if not reason:
                raise ValueError(f"README.md:{line - 1}: a readme-test skip marker needs a reason")
        blocks.append(Block(line, match.group("code"), reason))
    return blocks


def test_the_parser_finds_blocks_and_their_markers():
    text = (
        "intro\n```python\nx = 1\n```\n\n<!-- readme-test: skip (needs a GPU) -->\n"
        "```python\ny = 2\n```\n```bash\nls\n```\n"
    )
    blocks = python_blocks(text)
    assert [(b.line, b.code, b.skip) for b in blocks] == [
        (2, "x = 1\n", None),
        (7, "y = 2\n", "needs a GPU"),
    ]
    with pytest.raises(ValueError, match="needs a reason"):
        python_blocks("<!-- readme-test: skip -->\n```python\nz = 3\n```\n")


# the libraries a block may import that are optional here; where torchvision is broken they run
# beside the torchvision stand-in (tests/torchvision_stand_in.py), as the other tests run them,
# kept for the whole block (transformers imports its models lazily, on first use)
OPTIONAL = ("transformers", "timm")
PRELUDE = """\
import sys
sys.path.insert(0, {tests!r})
import torchvision_stand_in
if not torchvision_stand_in._torchvision_works():
    sys.meta_path.insert(0, torchvision_stand_in._Finder())
"""

BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks():
    assert BLOCKS, "README.md has no ```python block: the test below would pass on nothing"


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_readme_block_runs_as_written(block, tmp_path):
    if block.skip:
        pytest.skip(f"README.md:{block.line}: {block.skip}")
    needed = [name for name in OPTIONAL if re.search(rf"\b(import|from) {name}\b", block.code)]
    for name in needed:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"the block imports {name}, which is in the dev extra")
    code = (PRELUDE.format(tests=str(ROOT / "tests")) if needed else "") + block.code
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",  # a block must not need the network
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"README.md:{block.line} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )
