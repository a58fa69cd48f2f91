#!/usr/bin/env bash
# device call 27: the streaming build's rows in shared memory (SmemRows):
# tests, checks and sanitizers on the new binary, then the streamed cells
# timed with FUSEPORT_CUDA_STREAM_SMEM=0 and 1, three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/smem; mkdir -p $O
OUT=$O DEADLINE=300 bash bench/gpu_session.sh tests check sanitize 2>&1 | grep -v "^ *$"
$B/fuseport check --backend cuda --op softmax,double_softmax,softmax_backward,layernorm,norm_chain \
  --shapes 66x30001,7x65537,3x262144,300x16385,130x40001,40x65537,100x65536,64x65536,33x100003 \
  --seed 5 >$O/check_stream.log 2>&1; echo "check stream shapes: exit $?"; tail -1 $O/check_stream.log
declare -A SH
SH[softmax]=128x65536,256x65536,512x65536,2048x65536,8192x65536
SH[norm_chain]=128x65536,512x65536,2048x65536
SH[layernorm]=256x32768,1024x32768,4096x32768,128x65536,512x65536,2048x65536
SH[double_softmax]=256x32768,1024x32768,4096x32768,128x65536,512x65536,2048x65536,8192x65536
SH[softmax_backward]=64x65536,100x65536,100x50000
for r in 1 2 3; do
  for v in 0 1; do
    for op in softmax norm_chain layernorm double_softmax softmax_backward; do
      FUSEPORT_CUDA_STREAM_SMEM=$v timeout 100 $B/fuseport bench --backend cuda --op $op --variants fused \
        --shapes ${SH[$op]} --rep-ms 20 --quiet --out $O/ab_${op}_$v$r.json || echo "$op $v $r: exit $?"
    done
  done
  echo "[$SECONDS s] round $r done"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf smem.tar.xz smem && rm -rf smem
