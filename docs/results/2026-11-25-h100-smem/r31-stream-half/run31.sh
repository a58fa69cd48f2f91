#!/usr/bin/env bash
# device call 31: the streaming build in blocks of 512 for at least two rows
# per SM of 16385..24576 floats (planner rule), against 8e3968b, three
# alternating rounds; checks and both sanitizers on such shapes.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r31; mkdir -p $O
$B/fuseport check --backend cuda --quiet 2>&1 | tail -1
$B/fuseport check --backend cuda --op double_softmax,layernorm,softmax_backward --shapes 300x16385,264x24576,1000x20001,200x20480 --seed 9 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax,layernorm --shapes 300x16385,270x24575 >$O/memcheck.log 2>&1; echo "memcheck: exit $?"; tail -2 $O/memcheck.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax,layernorm --shapes 300x16385,270x24575 >$O/racecheck.log 2>&1; echo "racecheck: exit $?"; tail -2 $O/racecheck.log
SH=264x16400,1024x16385,1024x20480,4096x20000,2048x24576,4096x24576,8192x20480,264x24576,200x20480
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 100 $f bench --backend cuda --op double_softmax,layernorm --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r31.tar.xz r31 && rm -rf r31
