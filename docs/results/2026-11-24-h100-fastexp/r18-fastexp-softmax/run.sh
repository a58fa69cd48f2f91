#!/usr/bin/env bash
# device call 18: fast exp also in softmax's streamed passes and
# double_softmax's first pass (fx2) against this tree (second and third
# passes only) and the previous binary; checks of both over many seeds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r18; mkdir -p $O
timeout 150 $B/test_ops cuda >$O/test_ops.log 2>&1; echo "test_ops: exit $? ($(grep -c '\[       OK \]' $O/test_ops.log) ok)"
for n in fuseport fuseport.fx2; do
  fails=0
  for s in $(seq 1 30); do
    $B/$n check --backend cuda --quiet --op softmax,double_softmax --shapes 1000x3,7x65537,2x262144,66x30001,130x40001,300x1000,40x65536 --seed $s >>$O/check_$n.log 2>&1 || fails=$((fails+1))
  done
  echo "$n: 30 seeds, $fails failing runs"
done
$B/fuseport.fx2 check --backend cuda --op softmax,double_softmax --shapes 130x40001,40x65536,2x262144 --seed 7 >$O/check_fx2_detail.log 2>&1
RO=softmax,double_softmax
SH=1024x1024,4096x16384,128x65536,256x32768,256x65536,512x32768,1024x65536,4096x32768,2048x65536,8192x65536
for r in 1 2 3; do
  for n in base new fx2; do
    [ $SECONDS -gt 500 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op $RO --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
    echo "[$SECONDS s] $n round $r done"
  done
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r18.tar.xz r18 && rm -rf r18
