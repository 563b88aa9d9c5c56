#!/usr/bin/env bash
# The GPU machine's calls (torch preinstalled, no network: nothing is installed, the checkout runs
# from src/). Logs go to $OUT (default ./gpu-session).
#
#   tools/gpu_session.sh [check] [OPTIONS]  # the device check (default): tools/gpu_check.py, every
#                                           # part in one call of at most 8 minutes (its budget is
#                                           # 7.5), JSON and per-part logs under $OUT; OPTIONS go
#                                           # to it (--parts, --budget, --part-limit ...).
#                                           # docs/gpu/README.md says what it checks.
#   tools/gpu_session.sh tests      # the CUDA tests: kernels, wiring, the harness on CUDA (one
#                                   # call of its own: several minutes)
#   tools/gpu_session.sh kernels    # gelus bench kernels --device cuda (every size 2^16..2^28,
#                                   # the host-time tables docs/CUDA.md quotes) and the GPT-2 step
#                                   # with the 2026-11-26 compiled region (--compile-scope model)
#   tools/gpu_session.sh training   # gelus bench training --device cuda --plan, the transformer
#                                   # bench with 15 runs stacked
#
# tests, kernels and training each take a call of their own (3-5 min each on the 2026-11-26 H200).
# STEP_LIMIT=SECONDS caps each of their steps (a hung step then costs that, not the whole lease).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=${OUT:-gpu-session}
mkdir -p "$OUT"
status=0

step() {  # step NAME COMMAND...: run, tee to $OUT/NAME.log, remember a failure
    local name=$1
    shift
    echo "== $name: $*" | tee "$OUT/$name.log"
    timeout "${STEP_LIMIT:-0}" "$@" 2>&1 | tee -a "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc" | tee -a "$OUT/$name.log"
    [ "$rc" -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

command=${1:-check}
[ $# -gt 0 ] && shift
case "$command" in
check | --*)
    [ "$command" = check ] || set -- "$command" "$@"
    python3 tools/gpu_check.py --out "$OUT" "$@"
    exit $? ;;
tests)
    step tests python3 -m pytest -q -p no:cacheprovider -n 8 tests/library/test_triton_cuda.py \
        tests/library/test_cuda_wiring.py tests/experiments/test_runs_on_cuda.py \
        tests/experiments/test_device_batches.py tests/experiments/test_budget.py tests/experiments/test_device.py \
        tests/experiments/test_transformer_stacked.py
    # the tests that run the kernels on CPU tensors, as CI does: in Triton's interpreter
    # (-k also matches module names: test_kernels_on_cuda.py gets its own -k)
    TRITON_INTERPRET=1 step tests-interpreted python3 -m pytest -q -p no:cacheprovider -n 8 \
        -k "not on_cuda and not cuda_tensors" tests/library/test_cuda_wiring.py
    TRITON_INTERPRET=1 step tests-bench-interpreted python3 -m pytest -q -p no:cacheprovider -n 8 \
        -k "not on_the_gpu" tests/bench/test_kernels_on_cuda.py tests/bench/test_gpt2_step.py
    # the bench's CUDA clocks (graph capture of a public call's forward + backward, events)
    step tests-bench python3 -m pytest -q -p no:cacheprovider -rs -k on_the_gpu tests/bench/test_kernels_on_cuda.py
    # the kernels' accuracy tests (float64 and mpmath oracles), compiled for the GPU this time
    step tests-kernels python3 -m pytest -q -p no:cacheprovider -n 8 -rs \
        tests/library/test_triton_kernels.py tests/library/test_triton_members.py ;;
kernels)
    step bench-kernels python3 -m gelus bench kernels --device cuda --json "$OUT/bench-kernels.json"
    step gpt2-step python3 -m gelus.bench.gpt2_step
    step gpt2-step-model-scope python3 -m gelus.bench.gpt2_step --compile-scope model \
        --activations torch-exact,torch-tanh --steps 10 ;;
training)
    step bench-training python3 -m gelus bench training --device cuda --plan
    # train.stack=auto's choice on a GPU: M runs stacked against one run per job, per run-step
    step bench-transformer python3 -m gelus bench transformer --device cuda --rounds 5 --stack 15 ;;
*)
    echo "usage: tools/gpu_session.sh [check [OPTIONS]|tests|kernels|training]" >&2
    exit 2 ;;
esac
exit $status
