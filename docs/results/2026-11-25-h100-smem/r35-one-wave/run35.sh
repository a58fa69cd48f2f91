#!/usr/bin/env bash
# device call 35: the streaming build in blocks of 512 for more rows than SMs
# but under two per SM, of up to 32768 floats (one wave instead of two),
# against 2a4f8d3, three alternating rounds; checks and racecheck there.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r35; mkdir -p $O
$B/fuseport check --backend cuda --op double_softmax,layernorm,softmax_backward --shapes 200x32768,133x20001,263x32767 --seed 14 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax,layernorm --shapes 200x32768,140x20001 >$O/racecheck.log 2>&1; echo "racecheck: exit $?"; tail -1 $O/racecheck.log
SH=256x32768,200x32768,140x32768,200x20480,256x24576,140x20000,263x16385,300x32768,100x32768
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 100 $f bench --backend cuda --op double_softmax,layernorm --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r35.tar.xz r35 && rm -rf r35
