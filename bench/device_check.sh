#!/usr/bin/env bash
# One lease of a GPU machine (the device tool of this workplace, or any CUDA node with the
# image's Python: numba-cuda, CuPy, pyarrow, tqdm, pytest): runs the package from the working
# tree without installing it: bench.gpu_latency, the kernel and engine cases on the device,
# then bench.gpu_run.
# Usage: bash bench/device_check.sh OUTDIR [gpu_run arguments...]
# Environment: LAT_S, LAT_REPEAT (bench.gpu_latency), CASES_S, CASE_TIMEOUT (per test),
# BENCH_S, BASE_S (time limits, s), WORKERS (pytest-xdist), CASES (files),
# CASES_LAST=1 (benchmark first), BASELINE="gpu_run args" (a run with BASELINE_ENV, default
# GPU_IVM_CAI_SYNC=always; GPU_IVM_FAST_LAUNCH=0 gives numba-cuda's own launch),
# COOP_SWEEP="64 1024 0" (gpu_run again with each block cut of the count kernel,
# GPU_IVM_COOP_MIN; 0 = every update on one thread), SWEEP_ARGS (those runs' gpu_run args).
# A cold machine compiles every CPU and CUDA kernel on first use: several minutes, paid by
# whichever step runs first (the cases, by default, on many workers), so give it the time.
set -u
OUT=${1:-/tmp/out}; shift || true
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_IVM_CACHE_DIR=/tmp/gpu_ivm_cache
# the editable install maps gpu_ivm.kernels -> kernels/ and gpu_ivm.spark_glue -> spark_glue/
ln -sfn ../kernels gpu_ivm/kernels; ln -sfn ../spark_glue gpu_ivm/spark_glue
PY=${PY:-python3}
nvidia-smi -L
$PY - <<'PY'
import importlib, sys
print(sys.version.split()[0])
for m in ("numpy", "numba", "numba_cuda", "cupy", "pyarrow", "pytest", "xdist"):
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "MISSING", type(e).__name__, e)
from gpu_ivm.backend import _device_problem
print("device problem:", _device_problem())
PY
echo "== bench.gpu_latency (the host's cost per launch, call, read, upload)"
timeout ${LAT_S:-90} $PY -m bench.gpu_latency --repeat ${LAT_REPEAT:-1000} --out "$OUT/latency.json" \
  2>&1 | tee "$OUT/latency.log"
cases() {
  echo "== cases on the device"
  # -v: every test's outcome is logged by name as it ends (an interrupted xdist session may
  # print no summary at all: on 2026-11-27 eight failures were counted but not named)
  GPU_IVM_TEST_DEVICE=1 timeout -s INT -k 20 ${CASES_S:-240} $PY -m pytest -v -p no:cacheprovider \
    --timeout ${CASE_TIMEOUT:-180} -n ${WORKERS:-12} -rf ${CASES:-tests/cuda_sim_cases.py tests/cuda_sim_cq_cases.py \
    tests/cuda_sim_window_device_cases.py tests/cuda_sim_insert_adj_cases.py \
    tests/cuda_sim_window_step_cases.py tests/cuda_sim_stamp_cases.py \
    tests/cuda_device_input_cases.py} \
    2>&1 | tee "$OUT/cases.log" | grep -E "FAILED|ERROR|passed|failed" | tail -n 40
}
[ -n "${CASES_LAST:-}" ] || cases
if [ -n "${BASELINE:-}" ]; then  # the same runner under another setting, for the A/B
  echo "== baseline: ${BASELINE_ENV:=GPU_IVM_CAI_SYNC=always} bench.gpu_run $BASELINE"
  env $BASELINE_ENV timeout ${BASE_S:-60} $PY -m bench.gpu_run $BASELINE \
    --out "$OUT/gpu_run_baseline.jsonl" 2>&1 | tee "$OUT/gpu_run_baseline.log" | tail -n 4
fi
echo "== bench.gpu_run $*"
timeout ${BENCH_S:-240} $PY -m bench.gpu_run --out "$OUT/gpu_run.jsonl" "$@" 2>&1 | tee "$OUT/gpu_run.log"
for c in ${COOP_SWEEP:-}; do  # the count kernel's block cut, timed on the device
  echo "== GPU_IVM_COOP_MIN=$c bench.gpu_run ${SWEEP_ARGS:-$*}"
  GPU_IVM_COOP_MIN=$c timeout ${BENCH_S:-240} $PY -m bench.gpu_run ${SWEEP_ARGS:-$*} \
    --out "$OUT/gpu_run_coop$c.jsonl" 2>&1 | tee "$OUT/gpu_run_coop$c.log" | tail -n 8
done
[ -z "${CASES_LAST:-}" ] || cases
