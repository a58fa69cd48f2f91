#!/usr/bin/env bash
# H100: the cells of the 1bd2b02 record below 0.97 of torch.compile and their
# neighbours, CUDA under the row planner's policies and block caps, three
# alternating rounds, then torch.compile on the same cells (two runs).
set -u
OUT=${OUT:-/tmp/fp-out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
FP=.gpu/bin/fuseport
S=128x4096,128x8192,256x4096,256x8192,512x4096,1024x2048,2048x2048,512x2048
OPS=softmax,softmax_backward,layernorm
one() { local name=$1 r=$2; shift 2
  env "$@" timeout 60 "$FP" bench --backend cuda --op $OPS --variants fused --shapes $S --rep-ms 20 \
    --out "$OUT/sm_$name$r.json" --quiet || echo "$name: exit $?"; }
for r in 1 2 3; do
  echo "== [$SECONDS s] round $r"
  one def $r X=1
  one block $r FUSEPORT_CUDA_ROW_BUILDS=block
  one cluster $r FUSEPORT_CUDA_ROW_BUILDS=cluster
  one cap256 $r FUSEPORT_CUDA_ROWS_BLOCK_CAP=256
  one cap512 $r FUSEPORT_CUDA_ROWS_BLOCK_CAP=512
done
for r in 1 2; do
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_bench.py --ops $OPS --shapes $S --modes compile \
    --rep-ms 20 --out "$OUT/sm_torch$r.json" > "$OUT/torch$r.log" 2>&1; echo "torch $r: exit $?"
done
(cd "$OUT" && tar czf sm.tgz sm_*.json torch*.log && rm -f sm_*.json torch*.log)
echo "== [$SECONDS s] done"
