#!/usr/bin/env bash
# device call 39: double_softmax's cached rows (long-row and cluster builds)
# with two team reductions (the power sums) against 2f42395: checks,
# sanitizers, three alternating rounds on cells of 16-256 MiB.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r39; mkdir -p $O
$B/test_ops >$O/test_ops.log 2>&1; echo "test_ops: exit $?"; tail -2 $O/test_ops.log
$B/fuseport check --backend cuda --op double_softmax --shapes 1x1,3x5,1000x3,7x1000,65537x3,333x1001,1000x4097,300x8191,500x12289,1000x16383,77x16384,8x131073,3x65536,130x40001,40x65537 --seed 31 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
FUSEPORT_CUDA_ROW_BUILDS=cluster $B/fuseport check --backend cuda --op double_softmax --shapes 64x30001,16x65537,100x8193 --seed 32 2>&1 | tail -1
FUSEPORT_CUDA_ROW_BUILDS=block $B/fuseport check --backend cuda --op double_softmax --shapes 64x30001,100x8193,1000x1000 --seed 33 2>&1 | tail -1
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax --shapes 1000x10240,8x100003,300x4097,33x20001 >$O/memcheck.log 2>&1; echo "memcheck: exit $?"; tail -1 $O/memcheck.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax --shapes 1000x10240,8x100003,300x4097 >$O/racecheck.log 2>&1; echo "racecheck: exit $?"; tail -1 $O/racecheck.log
echo "[$SECONDS s] checks done"
SH=256x16384,512x8192,512x16384,1024x4096,1024x8192,1024x16384,2048x2048,2048x4096,2048x8192,2048x16384,4096x1024,4096x2048,4096x4096,4096x8192,4096x16384,8192x512,8192x1024,8192x2048,8192x4096,8192x8192,16384x256,16384x512,16384x1024,16384x2048,16384x4096,32768x128,32768x256,32768x512,32768x1024,32768x2048,65536x128,65536x256,65536x512,65536x1024,128x16384,128x8192,128x4096,8x131072,16x65536
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 120 $f bench --backend cuda --op double_softmax --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r39.tar.xz r39 && rm -rf r39
