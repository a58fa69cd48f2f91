#!/usr/bin/env bash
# The commands behind this folder: one call on an H200 via the device tool, 2026-11-29 17:03 UTC;
# fuseport 0000456 (the GEMM code of main since) built here with -DCMAKE_CUDA_ARCHITECTURES=90.
# Each bench alternated in the call with an experimental build (asynchronous stores for unaligned
# out, not kept; see README.md). The table of docs/PERF.md:
#   python3 bench/perf_gemm.py --misaligned misaligned-1.json misaligned-2.json
FP=build-gpu/fuseport
MS="4096x4096x4096,4096x4095x4096,4096x4096x4095,4097x4097x4097,2048x50257x1024,2048x50304x1024,4104x4104x4104"
for round in 1 2; do
  $FP bench --backend cuda --op matmul_relu --variants fused --shapes $MS --param dtype=f16 \
    --param trans_b=false,true --sample-elems 262144 --quiet --out misaligned-$round.json
done
$FP bench --backend cuda --op matmul_split_act,linear_geglu --variants fused \
  --shapes 4096x4096x4096,4097x4097x4097,4096x4095x4096 --param dtype=f16 --sample-elems 262144 \
  --quiet --out paired.json
