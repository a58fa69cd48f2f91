#!/usr/bin/env bash
# device call 24: the streaming build (rows the long-row build would
# stream): tests, checks, memcheck and racecheck on it, then timed with
# 4/2 (new), 2/2 and 4/4 loads in flight (first pass / later ones) against
# 63eb670's kernels (base), three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r24; mkdir -p $O
RO=softmax,double_softmax,softmax_backward,layernorm,norm_chain
timeout 150 $B/test_ops cuda >$O/test_ops.log 2>&1; echo "test_ops: exit $? ($(grep -c '\[       OK \]' $O/test_ops.log) ok)"
timeout 100 $B/test_backend cuda >$O/test_backend.log 2>&1; echo "test_backend: exit $?"
for n in fuseport fuseport-s22 fuseport-s44; do
  $B/$n check --backend cuda --quiet --op $RO --shapes 66x30001,130x40001,40x65537,300x16385,1x262144,3x100001,70x32769 --seed 9 2>&1 | tail -1
done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op $RO --shapes 66x30001,40x32769,1x262144 >$O/memcheck.log 2>&1
echo "memcheck: exit $?"; tail -1 $O/memcheck.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op $RO --shapes 40x16385,34x32769 >$O/racecheck.log 2>&1
echo "racecheck: exit $?"; tail -1 $O/racecheck.log
SH=128x65536,256x32768,256x65536,512x32768,1024x32768,1024x65536,4096x32768,2048x65536,8192x32768,8192x65536,1024x16384,4096x16384,4096x4096,512x2048,128x1024
for r in 1 2 3; do
  for n in base new s22 s44; do
    [ $SECONDS -gt 520 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op $RO --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
  done
  echo "[$SECONDS s] round $r done"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r24.tar.xz r24 && rm -rf r24
