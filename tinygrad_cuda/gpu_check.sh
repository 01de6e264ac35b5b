#!/usr/bin/env bash
# The CUDA backend's full check on a machine with an NVIDIA GPU: install pycuda, run the CUDA tests, the core tests
# and the conformance suite on CUDA, and a matmul + fused-elementwise benchmark (next to PyTorch when installed).
#
#   tinygrad_cuda/gpu_check.sh                      run everything (from the repository root)
#   tinygrad_cuda/gpu_check.sh --prepare DIR        on a connected machine: download pycuda and its dependencies
#                                                   into DIR, for a GPU machine that can't reach a package index
#   WHEELHOUSE=DIR tinygrad_cuda/gpu_check.sh       install pycuda from DIR (offline)
#
# Results (test summaries, benchmark table, GPU name and date) go to $OUT if set, else bench/results/.
set -u
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then
  dir="${2:?usage: $0 --prepare DIR}"
  python -m pip download --no-binary pycuda -d "$dir" pycuda setuptools wheel numpy || exit 1
  echo "now carry $dir to the GPU machine and run: WHEELHOUSE=$dir $0"
  exit 0
fi

results="${OUT:-bench/results}"
mkdir -p "$results"
stamp="$(date -u +%Y-%m-%dT%H%M%SZ)"
report="$results/cuda_check_$stamp.txt"
log() { echo "$@" | tee -a "$report"; }

log "== tinygrad-cuda GPU check, $stamp"
gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
log "GPU: ${gpu:-none found by nvidia-smi}"
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$CUDA_HOME/bin:$PATH"
log "nvcc: $(nvcc --version 2>/dev/null | tail -1)"

# 1. pycuda (it builds against the toolkit's headers and the driver's libcuda)
if ! python -c "import pycuda.driver" 2>/dev/null; then
  log "-- installing pycuda"
  if [ -n "${WHEELHOUSE:-}" ]; then
    python -m pip install --no-index --find-links "$WHEELHOUSE" --no-build-isolation pycuda 2>&1 | tail -3 | tee -a "$report"
  else
    python -m pip install pycuda 2>&1 | tail -3 | tee -a "$report"
  fi
fi
python -m pip install --no-deps --no-build-isolation -q -e . -e plugins/tinygrad_python -e tinygrad_cuda 2>&1 | tail -2
log "-- backends"
python -m tinygrad_core.cli backends 2>&1 | tee -a "$report" || python -c "
from tinygrad_core.plugins import registry
for b in registry.all(): print(b.name, b.distribution, b.status, b.reason or '')" | tee -a "$report"

jobs="$(nproc)"
run_tests() {   # label, then the pytest arguments
  local label="$1"; shift
  log "-- $label"
  python -m pytest -q -p no:cacheprovider "$@" 2>&1 | tail -15 | tee -a "$report"
}
# 2. the backend's own tests (the GPU ones run now), 3. the core tests on CUDA, 4. the conformance suite
run_tests "tinygrad_cuda tests" tinygrad_cuda/tests -n "$jobs"
TINYGRAD_DEVICE=CUDA run_tests "core tests on CUDA" tests -n "$jobs"
run_tests "conformance on CUDA" --pyargs tinygrad_core.conformance --backend CUDA \
  --conformance-json "$results/cuda_conformance_$stamp.json"

# 5. benchmark: matmul and a fused elementwise chain, against PyTorch on the same GPU when it is installed
log "-- benchmark"
python - <<'EOF' 2>&1 | tee -a "$report"
import time
import numpy as np
from tinygrad_core import Device, Tensor
from tinygrad_core.dtype import dtypes

def best_time(fn, repeat=5):
    fn()                        # compile / warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)

def ours_matmul(n, dtype):
    a = Tensor(np.random.rand(n, n).astype(np.float32), device="CUDA").cast(dtype).realize()
    b = Tensor(np.random.rand(n, n).astype(np.float32), device="CUDA").cast(dtype).realize()
    def run():
        (a @ b).realize()
        Device["CUDA"].synchronize()
    return best_time(run)

def ours_elementwise(n):
    x = Tensor(np.random.rand(n).astype(np.float32), device="CUDA").realize()
    def run():
        ((x * 1.5 + 2.0).relu() * x - x.exp2()).realize()
        Device["CUDA"].synchronize()
    return best_time(run)

try:
    import torch
    assert torch.cuda.is_available()
except Exception:
    torch = None

def torch_time(fn):
    def run():
        fn()
        torch.cuda.synchronize()
    return best_time(run)

rows = []
for n, dtype in ((1024, dtypes.float32), (4096, dtypes.float32), (4096, dtypes.half)):
    seconds = ours_matmul(n, dtype)
    row = [f"matmul {n}x{n} {dtype.name}", f"{2 * n ** 3 / seconds / 1e12:.2f} TFLOP/s", f"{seconds * 1e3:.2f} ms"]
    if torch is not None:
        tdtype = torch.float16 if dtype == dtypes.half else torch.float32
        ta, tb = torch.rand(n, n, device="cuda", dtype=tdtype), torch.rand(n, n, device="cuda", dtype=tdtype)
        row.append(f"torch/ours time ratio {torch_time(lambda: ta @ tb) / seconds:.3f}")
    rows.append(row)
n = 1 << 24
seconds = ours_elementwise(n)
row = [f"fused elementwise {n}", f"{n * 8 / seconds / 1e9:.1f} GB/s", f"{seconds * 1e3:.2f} ms"]
if torch is not None:
    tx = torch.rand(n, device="cuda")
    row.append(f"torch/ours time ratio {torch_time(lambda: (tx * 1.5 + 2.0).relu() * tx - torch.exp2(tx)) / seconds:.3f}")
rows.append(row)
for row in rows:
    print("  ".join(row))
EOF
log "== report: $report"
