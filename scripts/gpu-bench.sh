#!/usr/bin/env bash
# `hasfl bench` on a machine with CUDA and a Python that has torch, numpy, pandas, pyarrow and
# pyyaml (jsonschema may come as wheels in .whl/). Writes to ${OUT:-bench-gpu}/.
#
# Steps (each skippable): TRAIN=1 a real training job end to end on the GPU (quick preset, digits,
# hasfl) -> train_job-<p>.json, train_timings-<p>.json; BENCH=1 the bench sections BENCH_SECTIONS
# (default client,width,server,paper-scale; the quick-preset section needs a finished quick run)
# -> h200-<p>.json and the page h200-<p>.md; EXPERIMENTS=1 (off by default) the GPU experiments of
# scripts/experiments/ (CUDA-graph step; concurrent jobs without MPS, with MPS, with MPS + graph
# steps, and their packing of the paper preset) -> exp-*.json.
# PRECISION=fp32|tf32|bf16 (config key precision, default fp32); PRECISIONS="fp32 bf16" runs the
# steps once per precision (the train job for the first only).
#
# One device call that refreshes docs/performance-gpu.md (not timed since the bench became a package;
# its old width + paper-scale + concurrency sections took 175 s on an H200):
#   scripts/gpu-bench.sh && cp bench-gpu/h200-fp32.json docs/bench/h200.json &&
#   hasfl bench --from-json docs/bench/h200.json --doc docs/performance-gpu.md
set -u
OUT=${OUT:-bench-gpu}
if [ -z "${GPU_BENCH_CHILD:-}" ]; then
  mkdir -p "$OUT"
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
  fi
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  { nvidia-smi -L; python3 -c "import torch, sys; print(sys.version); print(torch.__version__, torch.cuda.get_device_name())"; nproc; } 2>&1 | tee "$OUT/machine.txt"
  if [ -n "${PRECISIONS:-}" ]; then
    train=${TRAIN:-1}
    for p in $PRECISIONS; do
      echo "== precision $p"
      GPU_BENCH_CHILD=1 TRAIN=$train PRECISION=$p OUT=$OUT bash "$0"
      train=0
    done
    exit 0
  fi
fi
PRECISION=${PRECISION:-fp32}
EXP=scripts/experiments
if [ "${TRAIN:-1}" = 1 ]; then
  sed 's/^name: quick/name: quick-gpu/' presets/quick.yaml > /tmp/quick-gpu.yaml && printf 'device: cuda\nprecision: %s\n' "$PRECISION" >> /tmp/quick-gpu.yaml
  ( time ( python3 -m hasfl.cli data --config /tmp/quick-gpu.yaml --dataset digits --seed 42 --out /tmp/d >/dev/null &&
    timeout 120 python3 -m hasfl.cli train --config /tmp/quick-gpu.yaml --dataset digits --method hasfl --seed 42 \
      --data /tmp/d --out /tmp/run > "$OUT/train_job-$PRECISION.json" ) ) 2>&1 | tail -4
  echo "train rc=$?"; cp /tmp/run/timings.json "$OUT/train_timings-$PRECISION.json" 2>/dev/null
fi
if [ "${BENCH:-1}" = 1 ]; then
  timeout "${BENCH_TIMEOUT:-330}" python3 -m hasfl.cli bench --device cuda --precision "$PRECISION" \
    --sections "${BENCH_SECTIONS:-client,width,server,paper-scale}" --fed-client-n 1024 --label "one H200 GPU" \
    --json-out "$OUT/h200-$PRECISION.json" --doc "$OUT/h200-$PRECISION.md" >/dev/null 2>"$OUT/h200-$PRECISION.log"
  echo "bench rc=$?"; tail -3 "$OUT/h200-$PRECISION.log"
fi
if [ "${EXPERIMENTS:-0}" = 1 ]; then
  if [ "$PRECISION" != bf16 ]; then  # the graph step has no bf16 variant
    timeout 240 python3 "$EXP/cuda_graph_step.py" --device cuda --precision "$PRECISION" > "$OUT/exp-graph-$PRECISION.json"
    echo "graph rc=$?"
  fi
  timeout 200 python3 "$EXP/concurrency.py" run --device cuda --precision "$PRECISION" --jobs 1,4,8,16 --seconds 4 \
    --label "no MPS, $PRECISION" > "$OUT/exp-concurrency-$PRECISION.json"
  echo "concurrency rc=$?"
  runs=("$OUT/exp-concurrency-$PRECISION.json")
  if command -v nvidia-cuda-mps-control >/dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p /tmp/mps /tmp/mps-log
    nvidia-cuda-mps-control -d && echo "MPS started"
    timeout 150 python3 "$EXP/concurrency.py" run --device cuda --precision "$PRECISION" --jobs 1,8,16 --seconds 4 \
      --label "MPS on, $PRECISION" > "$OUT/exp-concurrency-mps-$PRECISION.json" && runs+=("$OUT/exp-concurrency-mps-$PRECISION.json")
    echo "mps rc=$?"
    if [ "$PRECISION" != bf16 ]; then
      timeout 150 python3 "$EXP/concurrency.py" run --device cuda --precision "$PRECISION" --jobs 1,8,16 --seconds 4 \
        --graph --label "MPS on, CUDA graphs, $PRECISION" > "$OUT/exp-concurrency-mps-graph-$PRECISION.json" &&
        runs+=("$OUT/exp-concurrency-mps-graph-$PRECISION.json")
      echo "mps graph rc=$?"
    fi
    echo quit | nvidia-cuda-mps-control
  else
    echo "MPS skipped (no nvidia-cuda-mps-control)"
  fi
  if [ -s "$OUT/h200-$PRECISION.json" ]; then
    python3 "$EXP/concurrency.py" pack "$OUT/h200-$PRECISION.json" "${runs[@]}" > "$OUT/exp-packed-$PRECISION.json"
    echo "pack rc=$?"
  fi
fi
