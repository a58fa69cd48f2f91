#!/usr/bin/env bash
# device call 46: streamed rows of 16385..32768 floats in blocks of 512
# (two per SM), kept in shared memory (FUSEPORT_CUDA_STREAM_SMEM=all) or
# not (default), d9da24a; three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r46; mkdir -p $O
SH=256x32768,200x32768,140x32768,263x32768,256x24576,1024x24576,4096x20480,1024x32768,128x65536
OPS=softmax,layernorm,norm_chain,double_softmax
for r in 1 2 3; do
  for v in dflt all; do
    if [ $v = all ]; then export FUSEPORT_CUDA_STREAM_SMEM=all; else unset FUSEPORT_CUDA_STREAM_SMEM; fi
    timeout 100 $B/fuseport bench --backend cuda --op $OPS --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r46.tar.xz r46 && rm -rf r46
