#!/usr/bin/env bash
# device call 32: rows of 8193..16384 floats that the long-row build caches
# in one 1024-thread block per SM, against the streaming build in blocks of
# 512 (FUSEPORT_CUDA_ROWS_BLOCK_CAP=512), three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r32; mkdir -p $O
SH=512x16384,2048x16384,8192x16384,4096x12288,300x16384,8192x10240,16384x16384,1024x16384
for r in 1 2 3; do
  for v in d c512; do
    case $v in
      d) E="";;
      c512) E="FUSEPORT_CUDA_ROWS_BLOCK_CAP=512";;
    esac
    env $E timeout 100 $B/fuseport bench --backend cuda --op layernorm,double_softmax,softmax_backward --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r32.tar.xz r32 && rm -rf r32
