#!/usr/bin/env bash
# Third device call (H100, NVIDIA OpenCL): softmax_backward's _local_back
# (the first 5120 floats of both rows in local memory) against _stream_back
# (FUSEPORT_OPENCL_ROW_LOCAL=0), three alternating rounds, CUDA beside;
# tests, checks and the kernel's registers first.
set -u
OUT=${OUT:-/tmp/fp-out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
FP=.gpu/bin/fuseport
log() { echo "== [$SECONDS s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for t in test_backend test_ops; do
  FUSEPORT_OPENCL_PLATFORM=NVIDIA timeout 150 .gpu/bin/$t opencl >"$OUT/$t.log" 2>&1
  echo "$t opencl: exit $? ($(grep -c '\[       OK \]' "$OUT/$t.log") ok," \
    "$(grep -c '\[  FAILED  \]' "$OUT/$t.log") failed lines)"
done
cat "$OUT"/test_backend.log "$OUT"/test_ops.log >"$OUT/tests-sb.log"; rm -f "$OUT"/test_backend.log "$OUT"/test_ops.log
FUSEPORT_OPENCL_BUILD_LOG=$OUT/build-sb.log FUSEPORT_OPENCL_BUILD_OPTIONS=-cl-nv-verbose \
  "$FP" check --backend opencl --platform NVIDIA --quiet | tail -1
grep -A3 "softmax_backward_fused_local_back'" "$OUT/build-sb.log" | grep -E "spill|Used"
"$FP" check --backend opencl --platform NVIDIA --seed 27 --quiet --op softmax_backward \
  --shapes 5x32771,7x65537,3x100003,40x32768,2x1048577,300x40001,1x32768,64x65536 | tail -1
S=128x32768,256x32768,1024x32768,4096x32768,16384x32768,128x65536,256x65536,1024x65536,2048x65536,4096x65536,8192x65536,16384x65536,300x40001
for r in 1 2 3; do
  log "round $r"
  FUSEPORT_OPENCL_ROW_LOCAL=0 timeout 120 "$FP" bench --backend opencl --platform NVIDIA --op softmax_backward \
    --variants fused --shapes $S --rep-ms 10 --out "$OUT/sb_stream$r.json" --quiet
  timeout 120 "$FP" bench --backend opencl --platform NVIDIA --op softmax_backward \
    --variants fused --shapes $S --rep-ms 10 --out "$OUT/sb_local$r.json" --quiet
done
timeout 120 "$FP" bench --backend cuda --op softmax_backward --variants fused --shapes $S --rep-ms 10 \
  --out "$OUT/sb_cuda.json" --quiet
(cd "$OUT" && tar czf sb.tgz sb_*.json && rm -f sb_*.json)
log done
