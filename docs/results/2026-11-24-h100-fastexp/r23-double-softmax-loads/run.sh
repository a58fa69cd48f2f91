#!/usr/bin/env bash
# device call 23: double_softmax's streamed passes with U float4 loads in
# flight per thread (first pass / second and third): 4/2, 2/4, 4/4, 3/3
# against 2/2 (63eb670's kernels), three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r23; mkdir -p $O
for n in ds42 ds24 ds44 ds33; do
  $B/fuseport-$n check --backend cuda --quiet --op double_softmax --shapes 66x30001,130x40001,40x65537,300x16385,1x262144,3x100001,1000x3 --seed 7 2>&1 | tail -1
done
SH=128x65536,256x32768,256x65536,512x32768,1024x32768,1024x65536,4096x32768,2048x65536,8192x32768,16384x32768,1024x16384,4096x16384,4096x4096,512x2048,128x1024
for r in 1 2 3; do
  for n in new ds42 ds24 ds44 ds33; do
    [ $SECONDS -gt 520 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op double_softmax --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
  done
  echo "[$SECONDS s] round $r done"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r23.tar.xz r23 && rm -rf r23
