#!/usr/bin/env bash
# The transformer results committed under docs/results/ (transformer-lm, -vit, -scale): each
# preset at a setting that fits a few hours of wall time on a 2-core CPU, 5 seeds, the six main
# FFN activations (four at three sizes for -scale), a grid of learning rates. Resumable: run it again after an interruption and
# finished runs are skipped, interrupted ones continue from their checkpoints.
#
#   tools/transformer_results.sh            # both sweeps, then pack and regenerate both reports
#   tools/transformer_results.sh lm_init    # the LM under torch's init, beside lm's records
#   tools/transformer_results.sh scale      # the LM at three sizes (transformer-scale)
#   tools/transformer_results.sh factorial  # d 48 and d 80 at three budgets, beside scale's records
#   tools/transformer_results.sh warmup     # warmup 0 beside 0.05 at d 48 and d 80
#   OUT=/elsewhere tools/transformer_results.sh lm
#
# LM: d 128, 4 layers, context 128, batch 16, 1,000 AdamW steps (5 evaluations of 200 steps, on
# 64 KiB of each held-out split), ≈ 0.27 s a step on one thread: ≈ 3.5 h on 2 cores here. Its lr
# grid is 2e-3, 4e-3, 8e-3: at this budget GELU's validation loss fell monotonically over the
# preset's 1e-3, 2e-3, 4e-3 (its five runs at 1e-3 stay in the records, a fourth lr for GELU).
# GELU, ReLU and SiLU chose 8e-3 and were run at 1.6e-2 as well: 15 runs, 44 min on 2 cores.
# ViT: the preset's model, 4 epochs of the 55,000 Fashion-MNIST training images (1,716 steps),
# ≈ 0.08 s a step on one thread; lr 5e-4, 1e-3, 2e-3 (the preset's) and 4e-3, added when four
# activations chose 2e-3: 266 run-minutes for the first 90 runs, 39 min of wall time on 2 cores for
# the 30 at 4e-3, ≈ 3 h in all here.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs}
ACTIVATIONS=(gelu relu silu relu2 geglu swiglu)
PYTHON=${PYTHON:-python3}

lm() {
    local run=("$PYTHON" -m gelus run transformer-lm --seeds 5 --set train.epochs=5
        --set train.steps_per_epoch=200 --set train.eval_bytes=65536 --out "$OUT/results-transformer-lm")
    "${run[@]}" --activations "${ACTIVATIONS[@]}" --set optim.lr=2e-3,4e-3,8e-3
    # the three that chose 8e-3, the grid's edge, at 1.6e-2 too (the other runs are skipped)
    "${run[@]}" --activations gelu relu silu --set optim.lr=2e-3,4e-3,8e-3,1.6e-2
}

# The init question (docs/REPORT.md, "The folklore"): the same sweep under torch's default init
# (--set model.init=torch) beside the committed GPT-2-init records, GELU, ReLU, squared ReLU and
# SwiGLU. Under this init GELU's validation loss kept falling as the lr doubled from 2e-3 to 1.6e-2,
# so the grid moved up as the runs came in: GELU and ReLU at 2e-3 … 3.2e-2, squared ReLU and SwiGLU
# at 8e-3, 1.6e-2, 3.2e-2 (80 runs, ≈ 2 h 30 min on 2 cores). `tools/transformer_results.sh
# lm_init` packs it into docs/results/transformer-lm with the rest.
lm_init() {
    local run=("$PYTHON" -m gelus run transformer-lm --seeds 5 --set train.epochs=5
        --set train.steps_per_epoch=200 --set train.eval_bytes=65536 --set model.init=torch
        --out "$OUT/results-transformer-lm")
    "${run[@]}" --activations gelu relu --set optim.lr=2e-3,4e-3,8e-3,1.6e-2,3.2e-2
    "${run[@]}" --activations relu2 swiglu --set optim.lr=8e-3,1.6e-2,3.2e-2
}

# The scale question (issue 33's CPU minimum): the transformer-scale preset (d 48 × 2 layers, 80 × 3,
# 128 × 4; 2.5 training bytes per weight; GELU, ReLU, squared ReLU, SwiGLU; 5 seeds; lr 2e-3,
# 4e-3, 8e-3), d 48 at 1e-3 … 1.6e-2, d 80 at 2e-3 … 1.6e-2 (and 1e-3 for squared ReLU and
# SwiGLU). The grid moved as the runs came in (the preset's fidelity notes say how): 250 runs.
scale() {
    local run=("$PYTHON" -m gelus run transformer-scale --out "$OUT/results-transformer-scale")
    "${run[@]}"
    "${run[@]}" --set 'model.d_model,model.layers=48,2' --set optim.lr=1e-3,2e-3,4e-3,8e-3,1.6e-2
    "${run[@]}" --set 'model.d_model,model.layers=80,3' --set optim.lr=2e-3,4e-3,8e-3,1.6e-2
    # squared ReLU and SwiGLU chose 2e-3 at d 80, the grid's edge
    "${run[@]}" --activations relu2 swiglu --set 'model.d_model,model.layers=80,3' \
        --set optim.lr=1e-3,2e-3,4e-3,8e-3,1.6e-2
}

# Size and training length apart (issue 45): d 48 and d 80 each at 1.25 and 10 training bytes per
# weight beside the committed 2.5 (three budgets spanning 8× per size), GELU, ReLU, squared ReLU and
# SwiGLU, 5 seeds; lr 2e-3, 4e-3, 8e-3 per cell but 2e-3, 4e-3 at d 80 × 10 (the slowest cell, its
# runs ≈ 4× the 2.5 cell's steps; more steps favour smaller rates). `gelus run transformer-scale
# --plan` priced it at 44 min in two workers for the first 160 runs, 57 min with the 8e-3 runs.
factorial() {
    local run=("$PYTHON" -m gelus run transformer-scale --out "$OUT/results-transformer-scale")
    "${run[@]}" --set 'model.d_model,model.layers=48,2;80,3' --set train.tokens_per_param=1.25,10 \
        --set optim.lr=2e-3,4e-3
    "${run[@]}" --set 'model.d_model,model.layers=48,2' --set train.tokens_per_param=1.25,10 \
        --set optim.lr=2e-3,4e-3,8e-3
    "${run[@]}" --set 'model.d_model,model.layers=80,3' --set train.tokens_per_param=1.25 \
        --set optim.lr=2e-3,4e-3,8e-3
}

# The warmup claim (docs/REPORT.md, "The folklore"): optim.warmup=0 beside the committed 0.05, at
# d 48 and d 80 (2.5 bytes per weight), the four activations, lr 2e-3, 4e-3, 8e-3, 5 seeds: 120
# runs, ≈ 20 min in two workers. The d-128 LM's version (transformer-lm --set optim.warmup=0, its
# grid) is priced by `gelus run transformer-lm --plan --set optim.warmup=0 --activations gelu relu
# relu2 swiglu --set optim.lr=2e-3,4e-3,8e-3` (and the committed sweep's epochs, steps and eval bytes) at 2.35 h in two
# workers here, under load.
warmup() {
    "$PYTHON" -m gelus run transformer-scale --out "$OUT/results-transformer-scale" \
        --set 'model.d_model,model.layers=48,2;80,3' --set optim.warmup=0 \
        --set optim.lr=2e-3,4e-3,8e-3
}

vit() {
    "$PYTHON" -m gelus run transformer-vit --activations "${ACTIVATIONS[@]}" --seeds 5 \
        --epochs 4 --set optim.lr=5e-4,1e-3,2e-3,4e-3 --out "$OUT/results-transformer-vit"
}

for preset in "${@:-lm vit}"; do
    for name in $preset; do
        "$name"
        folder=${name%%_*}  # lm_init adds to lm's records
        case "$name" in factorial | warmup) folder=scale ;; esac
        "$PYTHON" tools/regenerate_results.py "docs/results/transformer-$folder" \
            --from "$OUT/results-transformer-$folder"
    done
done
