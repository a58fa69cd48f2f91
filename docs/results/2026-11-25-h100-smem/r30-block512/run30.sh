#!/usr/bin/env bash
# device call 30: the streaming build in blocks of 512 (two rows resident
# per SM, their reductions overlapped) against 1024 (FUSEPORT_CUDA_ROWS_BLOCK_CAP),
# with and without rows in shared memory, three alternating rounds; and a
# check of 8e3968b.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r30; mkdir -p $O
$B/fuseport check --backend cuda --quiet 2>&1 | tail -1
SH=1024x20480,4096x24576,256x32768,1024x32768,4096x32768,128x65536,512x65536,2048x65536
for r in 1 2 3; do
  for v in d c512 c512n; do
    case $v in
      d) E="";;
      c512) E="FUSEPORT_CUDA_ROWS_BLOCK_CAP=512";;
      c512n) E="FUSEPORT_CUDA_ROWS_BLOCK_CAP=512 FUSEPORT_CUDA_STREAM_SMEM=0";;
    esac
    env $E timeout 100 $B/fuseport bench --backend cuda --op double_softmax,layernorm,softmax,norm_chain --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r30.tar.xz r30 && rm -rf r30
