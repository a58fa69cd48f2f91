#!/usr/bin/env bash
# Fourth device call (H100, NVIDIA OpenCL, the committed kernels): softmax_backward's
# long rows under planner and build settings, two alternating rounds, CUDA beside.
set -u
OUT=${OUT:-/tmp/fp-out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
FP=.gpu/bin/fuseport
S=256x65536,1024x65536,4096x65536,8192x65536,4096x32768,1024x32768
one() { # name round env...
  local name=$1 r=$2; shift 2
  env "$@" timeout 100 "$FP" bench --backend opencl --platform NVIDIA --op softmax_backward \
    --variants fused --shapes $S --rep-ms 10 --out "$OUT/sg_$name$r.json" --quiet || echo "$name: exit $?"
}
for r in 1 2; do
  echo "== [$SECONDS s] round $r"
  one def $r X=1
  one g512 $r FUSEPORT_OPENCL_STREAM_GROUP=512
  one g256 $r FUSEPORT_OPENCL_STREAM_GROUP=256
  one u2 $r FUSEPORT_OPENCL_BUILD_OPTIONS=-DFP_STREAM_UNROLL=2
  one fwd $r FUSEPORT_OPENCL_STREAM_BACK=0
  one nolf $r FUSEPORT_OPENCL_BUILD_OPTIONS=-DFP_LAST_READ_EVICT_FIRST=0
done
timeout 100 "$FP" bench --backend cuda --op softmax_backward --variants fused --shapes $S --rep-ms 10 \
  --out "$OUT/sg_cuda.json" --quiet
(cd "$OUT" && tar czf sg.tgz sg_*.json && rm -f sg_*.json)
echo "== [$SECONDS s] done"
