#!/usr/bin/env bash
# device call 22: the streamed row functions out of line (__noinline__: the
# cached path's registers stay clean) with two (ni2) or four (ni4) float4
# loads in flight per thread, against 63eb670's kernels.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r22; mkdir -p $O
RO=softmax,double_softmax,softmax_backward,layernorm,norm_chain
for t in ni2 ni4; do
  timeout 150 $B/test_ops.$t cuda >$O/test_ops_$t.log 2>&1; echo "test_ops $t: exit $? ($(grep -c '\[       OK \]' $O/test_ops_$t.log) ok)"
  $B/fuseport.$t check --backend cuda --quiet --op $RO --shapes 66x30001,130x40001,40x65537,300x16385,1x262144,3x100001 --seed 6 2>&1 | tail -1
done
SH=128x65536,256x32768,256x65536,512x32768,1024x32768,1024x65536,4096x32768,2048x65536,8192x32768,1024x16384,4096x16384,4096x4096,512x2048
for r in 1 2 3; do
  for n in new ni2 ni4; do
    [ $SECONDS -gt 520 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op $RO --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
    echo "[$SECONDS s] $n round $r done"
  done
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r22.tar.xz r22 && rm -rf r22
