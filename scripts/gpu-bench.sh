#!/usr/bin/env bash
# GPU measurements of `hasfl bench` (issue 6 (d) and (k)) on a machine with CUDA and a
# Python that has torch, numpy, pandas, pyarrow and pyyaml (jsonschema may come as wheels
# in .whl/). Writes to ${OUT:-bench-gpu}/ (file names below).
set -u
OUT=${OUT:-bench-gpu}
# Steps: a real training job end to end on the GPU (quick preset, digits, hasfl), then the bench
# sections. TRAIN=0 / BENCH=0 / GRAPH=0 / MPS=0 (MPS_PLAIN=0, MPS_GRAPH=0) skip one.
# PRECISION=fp32|tf32|bf16 (config key precision, default fp32) for the train job and every bench
# call; PRECISIONS="bf16 fp32" runs the steps once per precision (the train job for the first
# only). BENCH_SECTIONS (default b,d,k) are the sections of the bench step. Every file is named
# after its precision: h200-<p>.json/.md, mps-<p>.json, mps-graph-<p>.json, graph-<p>.json,
# train_job-<p>.json. One device call that measures the paper preset's device-hours under bf16
# and strict fp32 (about 7 minutes on the H200; docs/performance-gpu.md):
#   PRECISIONS="bf16 fp32" BENCH_SECTIONS=b,d GRAPH=0 MPS_GRAPH=0 scripts/gpu-bench.sh
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
if [ "${TRAIN:-1}" = 1 ]; then
sed 's/^name: quick/name: quick-gpu/' presets/quick.yaml > /tmp/quick-gpu.yaml && printf 'device: cuda\nprecision: %s\n' "$PRECISION" >> /tmp/quick-gpu.yaml
( time ( python3 -m hasfl.cli data --config /tmp/quick-gpu.yaml --dataset digits --seed 42 --out /tmp/d >/dev/null &&
  timeout 120 python3 -m hasfl.cli train --config /tmp/quick-gpu.yaml --dataset digits --method hasfl --seed 42 \
    --data /tmp/d --out /tmp/run > "$OUT/train_job-$PRECISION.json" ) ) 2>&1 | tail -4
echo "train rc=$?"; cp /tmp/run/timings.json "$OUT/train_timings-$PRECISION.json" 2>/dev/null
fi
if [ "${BENCH:-1}" = 1 ]; then
timeout ${BENCH_TIMEOUT:-330} python3 -m hasfl.cli bench --device cuda --precision "$PRECISION" --sections "${BENCH_SECTIONS:-b,d,k}" --fed-client-n 1024 \
  --concurrency-jobs 1,4,8,16 --concurrency-s 4 --label "one H200, no MPS, $PRECISION" \
  --json-out "$OUT/h200-$PRECISION.json" --doc "$OUT/h200-$PRECISION.md" --write-doc >/dev/null 2>"$OUT/h200-$PRECISION.log"
echo "bench rc=$?"; tail -5 "$OUT/h200-$PRECISION.log"
fi
if [ "${GRAPH:-1}" = 1 ] && [ "$PRECISION" != bf16 ]; then
  timeout ${GRAPH_TIMEOUT:-240} python3 -m hasfl.cli bench --device cuda --precision "$PRECISION" --sections g --label "one H200, CUDA graph, $PRECISION" \
    --json-out "$OUT/graph-$PRECISION.json" --no-write-doc >/dev/null 2>"$OUT/graph-$PRECISION.log"
  echo "graph rc=$?"; tail -3 "$OUT/graph-$PRECISION.log"
fi
if command -v nvidia-cuda-mps-control >/dev/null && [ "${MPS:-1}" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p /tmp/mps /tmp/mps-log
  nvidia-cuda-mps-control -d && echo "MPS started"
  [ "${MPS_PLAIN:-1}" = 1 ] && timeout ${MPS_TIMEOUT:-150} python3 -m hasfl.cli bench --device cuda --precision "$PRECISION" --sections k --concurrency-jobs 1,8,16 \
    --concurrency-s 4 --label "one H200, MPS on, $PRECISION" --json-out "$OUT/mps-$PRECISION.json" --no-write-doc >/dev/null 2>"$OUT/mps-$PRECISION.log"
  echo "mps rc=$?"; tail -3 "$OUT/mps-$PRECISION.log"
  if [ "${MPS_GRAPH:-1}" = 1 ] && [ "$PRECISION" != bf16 ]; then  # the same, each job replaying its step as a CUDA graph
    timeout ${MPS_TIMEOUT:-150} python3 -m hasfl.cli bench --device cuda --precision "$PRECISION" --sections k --concurrency-jobs 1,8,16 \
      --concurrency-s 4 --concurrency-graph --label "one H200, MPS on, CUDA graphs, $PRECISION" --json-out "$OUT/mps-graph-$PRECISION.json" \
      --no-write-doc >/dev/null 2>"$OUT/mps-graph-$PRECISION.log"
    echo "mps graph rc=$?"; tail -3 "$OUT/mps-graph-$PRECISION.log"
  fi
  echo quit | nvidia-cuda-mps-control
else
  echo "MPS skipped (MPS=0 or no nvidia-cuda-mps-control)"
fi
