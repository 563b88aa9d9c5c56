"""Measure docs/NUMERICS.md's accuracy table on this machine and print it beside the documented one.

    python3 tools/accuracy_table.py                            # torch's best instruction set here
    ATEN_CPU_CAPABILITY=avx2 python3 tools/accuracy_table.py   # the AVX2 kernels on an AVX-512 CPU

The documented cells are the worst over the instruction sets measured (the table's note names
them); tests/library/test_accuracy.py checks each measured cell against them.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "tests" / "library")]

import torch  # noqa: E402

from _accuracy_table import REGIONS, ROWS, documented, grid, measure  # noqa: E402


def main() -> None:
    table = documented()
    x = grid()
    print(f"instruction set: {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}")
    print("| path | " + " | ".join(region for region, _, _ in REGIONS) + " |")
    print("|---|---|---|---|")
    for row in ROWS:
        cells = []
        for region, (value, gradient) in measure(row, x).items():
            bound, unit, gradient_bound = table[row][region]
            flag = "" if value <= bound and gradient <= (gradient_bound or gradient) else " (!)"
            cells.append(f"{value:.4g} {unit} / {gradient:.4g}{flag}")
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("(!): above the documented cell")


if __name__ == "__main__":
    main()
