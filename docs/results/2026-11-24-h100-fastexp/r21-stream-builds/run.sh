#!/usr/bin/env bash
# device call 21: streamed rows (longer than the long-row build's cache):
# the registered build's blocks instead (FP_EXP_STREAM_REG=1024/512: more
# resident threads, an experiment build) and four float4 loads in flight
# per thread instead of two (u4), against this tree (63eb670 + the knob).
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r21; mkdir -p $O
CU=$(dirname "$(command -v nvcc)")
for f in fuseport fuseport.u4; do
  $CU/cuobjdump -res-usage $B/$f 2>&1 | grep -A1 -E 'Function .*fused' | grep -E 'Function|REG' | paste - - | sed -E 's/.*Function ([^:]*):.*REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+) LOCAL:([0-9]+).*/\1 REG \2 STACK \3 LOCAL \5/' | grep -E 'softmax|layernorm|norm_chain' >$O/res_$f.txt
done
cat $O/res_fuseport.u4.txt
RO=softmax,double_softmax,softmax_backward,layernorm,norm_chain
for t in "test_ops" "test_ops.u4"; do
  for e in 1024 512; do
    FP_EXP_STREAM_REG=$e timeout 150 $B/$t cuda >$O/$t-$e.log 2>&1; echo "$t sreg $e: exit $? ($(grep -c '\[       OK \]' $O/$t-$e.log) ok)"
  done
done
for n in fuseport-sreg1024 fuseport-sreg512 fuseport-u4 fuseport-u4sreg512; do
  $B/$n check --backend cuda --quiet --op $RO --shapes 66x30001,130x40001,40x65537,300x16385,1x262144,3x100001 --seed 5 2>&1 | tail -1
done
SH=128x65536,256x32768,256x65536,512x32768,1024x65536,4096x32768,2048x65536,8192x65536,1024x16384,4096x16384
for r in 1 2; do
  for n in new sreg1024 sreg512 u4 u4sreg512; do
    [ $SECONDS -gt 520 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op $RO --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
    echo "[$SECONDS s] $n round $r done"
  done
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r21.tar.xz r21 && rm -rf r21
