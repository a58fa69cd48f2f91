#!/usr/bin/env bash
# Second device call (H100, NVIDIA OpenCL): the hints as committed (level 2
# by default, evict-first last reads, hreduce_reduce's loop per kind of
# load, evict_last in the elementwise kernels): tests and checks with the
# default (FUSEPORT_OPENCL_PTX unset), plain loads (=0) against the default
# in two alternating rounds, CUDA on the same shapes, then the NVIDIA OpenCL
# seed grid for the record.
set -u
OUT=${OUT:-/tmp/fp-out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
FP=.gpu/bin/fuseport
log() { echo "== [$SECONDS s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
unset FUSEPORT_OPENCL_PTX
log "tests on NVIDIA OpenCL (default hints)"
for t in test_backend test_ops; do
  FUSEPORT_OPENCL_PLATFORM=NVIDIA timeout 150 .gpu/bin/$t opencl >"$OUT/$t.log" 2>&1
  echo "$t opencl: exit $? ($(grep -c '\[       OK \]' "$OUT/$t.log") ok," \
    "$(grep -c '\[  FAILED  \]' "$OUT/$t.log") failed lines)"
done
grep -A1 "test_opencl_ptx_knob" "$OUT/test_ops.log"
cat "$OUT"/test_backend.log "$OUT"/test_ops.log >"$OUT/tests.log"; rm -f "$OUT"/test_backend.log "$OUT"/test_ops.log
log "check, default hints (build options in build.log)"
FUSEPORT_OPENCL_BUILD_LOG=$OUT/build.log FUSEPORT_OPENCL_BUILD_OPTIONS=-cl-nv-verbose \
  "$FP" check --backend opencl --platform NVIDIA --quiet | tail -1
grep "^== " "$OUT/build.log"; grep -ci error "$OUT/build.log"
"$FP" check --backend opencl --platform NVIDIA --seed 26 --quiet \
  --shapes 3x5,7x65537,5x100003,40x32771,64x65537,33x1000,2x1048577,300x40001,1x1,1000x3 | tail -1

ROWS=softmax,double_softmax,softmax_backward,layernorm,norm_chain
ROW_SHAPES=128x65536,256x32768,256x65536,512x32768,1024x65536,2048x65536,4096x32768,512x16384,1024x1024,256x4096,2048x2048,512x8192,4096x4096,8192x8192
HR_SHAPES=256x65536,512x32768,1024x16384,2048x8192,4096x4096,8192x2048,16384x1024,32768x512,65536x256,512x65536,8192x4096,1024x1024,4096x1024,2048x65536
EL_SHAPES=1024x1024,2048x2048,4096x2048,4096x4096,8192x8192,16384x16384,128x65536,65536x128
run_cfg() { # name round env...
  local name=$1 r=$2
  shift 2
  env "$@" timeout 120 "$FP" bench --backend opencl --platform NVIDIA --op $ROWS --variants fused \
    --shapes $ROW_SHAPES --rep-ms 10 --out "$OUT/rows_$name$r.json" --quiet || echo "$name rows: exit $?"
  env "$@" timeout 60 "$FP" bench --backend opencl --platform NVIDIA --op hreduce_reduce,hreduce_pointwise \
    --variants fused --shapes $HR_SHAPES --rep-ms 10 --out "$OUT/hr_$name$r.json" --quiet || echo "$name hr: exit $?"
  env "$@" timeout 60 "$FP" bench --backend opencl --platform NVIDIA --op pointwise_chain,bias_gelu,bias_dropout_add \
    --variants fused --shapes $EL_SHAPES --rep-ms 10 --out "$OUT/el_$name$r.json" --quiet || echo "$name el: exit $?"
}
for r in 1 2; do
  log "round $r"
  run_cfg p0 $r FUSEPORT_OPENCL_PTX=0
  run_cfg def $r FUSEPORT_OPENCL_UNUSED=1
done
log "CUDA, same shapes"
timeout 90 "$FP" bench --backend cuda --op $ROWS --variants fused --shapes $ROW_SHAPES --rep-ms 10 \
  --out "$OUT/rows_cuda.json" --quiet
timeout 60 "$FP" bench --backend cuda --op hreduce_reduce,hreduce_pointwise --variants fused \
  --shapes $HR_SHAPES --rep-ms 10 --out "$OUT/hr_cuda.json" --quiet
timeout 60 "$FP" bench --backend cuda --op pointwise_chain,bias_gelu,bias_dropout_add --variants fused \
  --shapes $EL_SHAPES --rep-ms 10 --out "$OUT/el_cuda.json" --quiet
(cd "$OUT" && tar czf ab2.tgz rows_*.json hr_*.json el_*.json && rm -f rows_*.json hr_*.json el_*.json)
mkdir -p "$OUT/cl"
OUT=$OUT/cl DEADLINE=$((585 - SECONDS)) RESERVE=5 bash bench/gpu_session.sh bench-opencl
log done
