#!/usr/bin/env bash
# The AMP recipe on the lent GPU (issue 19): the bench's own models under Keras 3 on JAX,
# mixed_float16 + LossScaleOptimizer, every step compiled by XLA, against float32 at JAX's
# default matmul precision (TF32 on tensor cores) and at 'highest' (true FP32); and the largest
# batch that trains in 16 GiB per precision. Writes bench.json/bench.md per stage to $OUT.
#
# Run it on the device machine from the repository root, with the wheels that
# benchmarks/gpu/fetch_wheels.sh put in .whl/ carried along (see README "GPU benchmark").
# Sized for a 15-minute device budget: about 7 minutes of stages, each under its own timeout.
#
# SMOKE=1 PYTHON=.venv/bin/python runs the same stages at toy sizes with the project's own
# environment (tests/test_bench_jax.py does, on CPU): the script is tested, not only its parts.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-bench}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
if [ -z "${SMOKE:-}" ]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no GPU"
  "$PYTHON" -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__, jax.devices())"
} 2>&1 | tee "$OUT/versions.txt"
# Full sizes, or toy ones for the smoke test.
if [ -z "${SMOKE:-}" ]; then
  RESNET=(--models resnet50 --image-size 224 --batch-size 256 --steps 20 --warmup-steps 3
    --search-start 32 --batch-limit 4096 --search-budget-s 150)
  BERT=(--models bert --bert-size base --seq-lens 128,512 --batch-size 32 --steps 20
    --warmup-steps 3)
else  # the script's plumbing on the smallest models (JAX compiles ResNet-50 for a minute on CPU)
  RESNET=(--models mlp --batch-size 2 --steps 1 --warmup-steps 1 --search-start 4
    --batch-limit 4 --search-budget-s 60)
  BERT=(--models bert --bert-size tiny --seq-lens 8 --batch-size 2 --steps 1 --warmup-steps 1)
fi

stage() {  # stage NAME TIMEOUT_S ARGS...: one bench, its files under $OUT/NAME/
  local name=$1 limit=$2; shift 2
  echo "== $name ($(date +%T))"
  timeout "$limit" "$PYTHON" -m amp_pipeline.benchmarks bench --backend jax --repeats 1 \
    --output "$OUT/$name" "$@" 2>&1 | tee "$OUT/$name.log"
}

# 1. ResNet-50 at 224x224, batch 256; then its largest batch in 16 GiB (a V100-16GB's memory),
#    float32 vs mixed_float16, doubling from 32, then bisection.
stage resnet50 270 --policies float32,mixed_float16 "${RESNET[@]}" \
  --max-batch-search --memory-budget-gib 16
# 2. The pipeline's BERT-style encoder at BERT-base's shape (12 layers, 768 wide, 12 heads) over
#    token ids, sequences 128 and 512, batch 32: the model `--model bert --bert-size base` trains.
stage bert 240 --policies float32,mixed_float16 "${BERT[@]}"
echo "== done ($(date +%T))"
ls -l "$OUT"/*/bench.json
