#!/usr/bin/env bash
# device call 38: double_softmax's streamed rows in two reads (the second
# softmax's sum from the first pass's power sums) against 30d6681: checks,
# sanitizers on streamed shapes, three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r38; mkdir -p $O
$B/test_ops >$O/test_ops.log 2>&1; echo "test_ops: exit $?"; tail -2 $O/test_ops.log
$B/fuseport check --backend cuda --op double_softmax --shapes 130x40001,40x65537,33x100003,300x20000,200x32768,133x20001,263x32767,8x131073,1000x16385,3x65536,1x16385 --seed 21 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
FUSEPORT_CUDA_STREAM_SMEM=all $B/fuseport check --backend cuda --op double_softmax --shapes 300x20000,66x30001 --seed 22 2>&1 | tail -1
FUSEPORT_CUDA_ROW_BUILDS=block $B/fuseport check --backend cuda --op double_softmax --shapes 300x20000,66x30001 --seed 23 2>&1 | tail -1
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax --shapes 40x65537,200x32768,33x20001 >$O/memcheck.log 2>&1; echo "memcheck: exit $?"; tail -1 $O/memcheck.log
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax --shapes 40x65537,200x32768,140x20001 >$O/racecheck.log 2>&1; echo "racecheck: exit $?"; tail -1 $O/racecheck.log
echo "[$SECONDS s] checks done"
SH=128x16384,256x16384,512x16384,1024x16384,2048x16384,4096x16384,8192x16384,128x32768,256x32768,512x32768,1024x32768,2048x32768,4096x32768,8192x32768,128x65536,256x65536,512x65536,1024x65536,2048x65536,4096x65536,8192x65536,200x20001,40x65537
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 120 $f bench --backend cuda --op double_softmax --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r38.tar.xz r38 && rm -rf r38
