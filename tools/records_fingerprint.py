"""The records of tiny runs of every installed preset, without their timing values.

A refactor of the harness that claims "behaviour unchanged" is checked by running this against
the code before and after and comparing: every stored value but the timings (wall seconds per
epoch, step times) and the code version must be identical, and so must the command's printed
summary and exit code.

    python3 tools/records_fingerprint.py --src src --out /tmp/after.json
    python3 tools/records_fingerprint.py --src /old/checkout/src --out /tmp/before.json
    python3 tools/records_fingerprint.py --compare /tmp/before.json /tmp/after.json

Presets whose data is not installed are listed as skipped (the CIFAR and TIMIT families).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

_MLP = ("--set", "train.train_subset=1000", "--set", "train.eval_train_subset=500")
_TRANSFORMER = ("--set", "train.steps_per_epoch=4", "--set", "train.eval_bytes=4096")
_VIT = ("--set", "train.train_subset=512", "--set", "model.d_model=16", "--set", "model.layers=1")
_TINY = {  # preset -> arguments after `gelus run PRESET --quick --seeds 2 --epochs 1 --workers 0`
    "mnist-classification": ("--activations", "gelu", "relu", "--set", "optim.lr=1e-3", *_MLP),
    "mnist-noise": ("--activations", "gelu", "relu", "--set", "optim.lr=1e-3", *_MLP),
    "mnist-autoencoder": ("--activations", "gelu", "silu", "--set", "optim.lr=1e-3", *_MLP),
    "stochastic-gelu": ("--set", "optim.lr=1e-3", *_MLP),
    "twitter-pos": ("--activations", "gelu", "relu", "--set", "optim.lr=1e-3", *_MLP),
    "timit": ("--activations", "gelu", "relu", "--set", "optim.lr=1e-3", *_MLP),
    "transformer-lm": ("--activations", "gelu", "swiglu", *_TRANSFORMER),
    "transformer-vit": ("--activations", "gelu", "geglu", *_VIT),
    "cifar10-allconv": ("--activations", "gelu", "relu"),
}
_TIMING_METRICS = ("seconds",)
_UNSTAMPED = ("code_version",)  # metadata that names the checkout, not the run


def fingerprint(src: Path, presets: list[str]) -> dict:
    """Run each preset tiny with the code under ``src``; its records as comparable rows."""
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset in presets:
            out = Path(tmp) / preset
            command = [sys.executable, "-m", "gelus", "run", preset, "--quick", "--seeds", "2"]
            command += ["--epochs", "1", "--workers", "0", "--out", str(out), *_TINY[preset]]
            environment = os.environ | {"PYTHONPATH": str(src.resolve())}
            done = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=tmp)
            if not (out / "records.sqlite").exists():
                result[preset] = {
                    "skipped": done.stderr.strip().splitlines()[-1:],
                    "rc": done.returncode,
                }
                continue
            result[preset] = {"rc": done.returncode, "stdout": done.stdout.splitlines()}
            result[preset] |= _tables(out / "records.sqlite")
            print(f"{preset}: rc {done.returncode}, {_digest(result[preset])}", file=sys.stderr)
    return result


def _tables(database: Path) -> dict:
    connection = sqlite3.connect(database)
    try:
        runs = []
        for row in connection.execute("SELECT * FROM runs ORDER BY run_id"):
            *head, metadata = row
            stamp = {k: v for k, v in json.loads(metadata).items() if k not in _UNSTAMPED}
            runs.append([*head, stamp])
        records = [
            row
            for row in connection.execute(
                "SELECT * FROM records ORDER BY run_id, epoch, split, metric"
            )
            if row[9] not in _TIMING_METRICS  # the metric column
        ]
        timed = connection.execute(
            "SELECT experiment, config_hash, activation, device, threads, round FROM step_times"
            " ORDER BY experiment, config_hash, activation, device, round"
        ).fetchall()
    finally:
        connection.close()
    return {
        "runs": runs,
        "records": [list(r) for r in records],
        "step_times": [list(r) for r in timed],
    }


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def compare(before: dict, after: dict) -> int:
    """Print each preset's verdict; 0 when every preset ran alike in both."""
    differ = 0
    for preset in sorted(before.keys() | after.keys()):
        old, new = before.get(preset), after.get(preset)
        if old is None or new is None:
            print(f"{preset}: only in {'after' if old is None else 'before'}")
            differ += 1
            continue
        parts = [k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
        print(f"{preset}: {'identical' if not parts else 'DIFFERS in ' + ', '.join(parts)}")
        differ += bool(parts)
    return 1 if differ else 0


def main() -> int:
    """Fingerprint a checkout's tiny runs, or compare two fingerprints."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=Path("src"), help="the checkout's src folder")
    parser.add_argument("--out", type=Path, help="write the fingerprint here (JSON)")
    parser.add_argument("--presets", nargs="+", default=list(_TINY), choices=list(_TINY))
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(path.read_text()) for path in args.compare)
        return compare(before, after)
    result = fingerprint(args.src, args.presets)
    text = json.dumps(result, sort_keys=True, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
