#!/usr/bin/env bash
# device call 28: the record at 096445f (rows in shared memory): the
# threshold's neighbourhood timed with FUSEPORT_CUDA_STREAM_SMEM=0 and 1 (two
# rounds), then tests, checks, sanitizers, the CUDA seed grid and PyTorch.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/thr; mkdir -p $O
for r in 1 2; do
  for v in 0 1; do
    for op in softmax layernorm double_softmax norm_chain; do
      FUSEPORT_CUDA_STREAM_SMEM=$v timeout 60 $B/fuseport bench --backend cuda --op $op --variants fused \
        --shapes 2048x40960,512x49152,256x57344,1024x36864 --rep-ms 20 --quiet --out $O/ab_${op}_$v$r.json || echo "$op $v $r: exit $?"
    done
  done
  echo "[$SECONDS s] round $r done"
done
OUT=$OUT/rec DEADLINE=$((575 - SECONDS)) RESERVE=250 TORCH_ARGS="--rep-ms 10" bash bench/gpu_session.sh tests check sanitize bench-cuda torch
echo "elapsed $SECONDS"
cd $OUT && tar cJf thr.tar.xz thr && rm -rf thr
