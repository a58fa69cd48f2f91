#!/usr/bin/env bash
# One device call (H100, NVIDIA OpenCL): the inline-PTX cache hints of the
# OpenCL kernels (kernels/cl/common.cl, FUSEPORT_OPENCL_PTX), checked and
# timed against the plain loads in the same call, with CUDA for the ratio.
# Run from the repo root with .gpu (bin/, gpu-env.sh) and .debs carried.
set -u
OUT=${OUT:-/tmp/fp-out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
FP=.gpu/bin/fuseport
log() { echo "== [$SECONDS s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader

log "PTX builds: levels 2 and 1 (their build logs in build-ptx*.log)"
for lvl in 2 1; do
  FUSEPORT_OPENCL_PTX=$lvl FUSEPORT_OPENCL_BUILD_LOG=$OUT/build-ptx$lvl.log \
    FUSEPORT_OPENCL_BUILD_OPTIONS=-cl-nv-verbose \
    "$FP" check --backend opencl --platform NVIDIA --quiet --op hreduce_reduce,softmax,layernorm \
    --shapes 3x1000,40x32771 | tail -2
  grep -ci "error" "$OUT/build-ptx$lvl.log"
done
grep -B1 -A3 -i "error" "$OUT/build-ptx2.log" | head -20

log "tests on NVIDIA OpenCL, default level (2)"
for t in test_backend test_ops; do
  FUSEPORT_OPENCL_PTX=2 FUSEPORT_OPENCL_PLATFORM=NVIDIA timeout 150 .gpu/bin/$t opencl >"$OUT/$t.log" 2>&1
  echo "$t opencl: exit $? ($(grep -c '\[       OK \]' "$OUT/$t.log") ok," \
    "$(grep -c '\[  FAILED  \]' "$OUT/$t.log") failed lines)"
done
cat "$OUT"/test_backend.log "$OUT"/test_ops.log >"$OUT/tests.log"; rm -f "$OUT"/test_backend.log "$OUT"/test_ops.log
log "fuseport check on NVIDIA OpenCL: level 2, then with the evict-first last reads"
FUSEPORT_OPENCL_PTX=2 "$FP" check --backend opencl --platform NVIDIA --quiet | tail -2
FUSEPORT_OPENCL_PTX=2 FUSEPORT_OPENCL_BUILD_OPTIONS=-DFP_LAST_READ_EVICT_FIRST=1 \
  "$FP" check --backend opencl --platform NVIDIA --quiet --op softmax,double_softmax,softmax_backward,layernorm,norm_chain | tail -2

ROWS=softmax,double_softmax,softmax_backward,layernorm,norm_chain
ROW_SHAPES=128x65536,256x32768,256x65536,512x32768,1024x65536,2048x65536,4096x32768,512x16384,1024x1024,256x4096,2048x2048,512x8192,4096x4096,8192x8192
HR_SHAPES=256x65536,512x32768,1024x16384,2048x8192,4096x4096,8192x2048,16384x1024,32768x512,65536x256,512x65536,8192x4096,1024x1024,4096x1024,2048x65536
run_cfg() { # name, env assignments...
  local name=$1 r=$2
  shift 2
  env "$@" timeout 120 "$FP" bench --backend opencl --platform NVIDIA --op $ROWS --variants fused \
    --shapes $ROW_SHAPES --rep-ms 10 --out "$OUT/rows_$name$r.json" --quiet || echo "$name rows: exit $?"
  env "$@" timeout 60 "$FP" bench --backend opencl --platform NVIDIA --op hreduce_reduce,hreduce_pointwise \
    --variants fused --shapes $HR_SHAPES --rep-ms 10 --out "$OUT/hr_$name$r.json" --quiet || echo "$name hr: exit $?"
}
for r in 1 2; do
  log "round $r"
  run_cfg p0 $r FUSEPORT_OPENCL_PTX=0
  run_cfg p1 $r FUSEPORT_OPENCL_PTX=1
  run_cfg p2 $r FUSEPORT_OPENCL_PTX=2
  run_cfg p2lf $r FUSEPORT_OPENCL_PTX=2 FUSEPORT_OPENCL_BUILD_OPTIONS=-DFP_LAST_READ_EVICT_FIRST=1
done
log "CUDA, same shapes"
timeout 90 "$FP" bench --backend cuda --op $ROWS --variants fused --shapes $ROW_SHAPES --rep-ms 10 \
  --out "$OUT/rows_cuda.json" --quiet
timeout 60 "$FP" bench --backend cuda --op hreduce_reduce,hreduce_pointwise --variants fused \
  --shapes $HR_SHAPES --rep-ms 10 --out "$OUT/hr_cuda.json" --quiet
cd "$OUT" && tar czf ab.tgz rows_*.json hr_*.json && rm -f rows_*.json hr_*.json
log done
