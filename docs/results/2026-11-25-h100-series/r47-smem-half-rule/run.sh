#!/usr/bin/env bash
# device call 47: 1ff5b65 (rows of 16385..~28000 floats in blocks of 512 kept
# in shared memory) against d9da24a: cuda tests, checks, racecheck and
# memcheck on those geometries, three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r47; mkdir -p $O
$B/test_ops cuda >$O/test_ops.log 2>&1; echo "test_ops cuda: exit $?"; tail -1 $O/test_ops.log
$B/fuseport check --backend cuda --op softmax,double_softmax,layernorm,norm_chain,softmax_backward --shapes 1024x24576,200x20001,300x20000,4096x16385,263x27999,140x24575 --seed 47 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op softmax,double_softmax,layernorm,norm_chain --shapes 300x20001,140x24575 >$O/racecheck.log 2>&1; echo "racecheck: exit $?"; tail -1 $O/racecheck.log
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op softmax,double_softmax,layernorm,norm_chain --shapes 300x20001,140x24575 >$O/memcheck.log 2>&1; echo "memcheck: exit $?"; tail -1 $O/memcheck.log
SH=256x24576,1024x24576,4096x20480,300x20000,200x20001,4096x24576,1024x32768,256x32768,2048x16384
OPS=softmax,layernorm,norm_chain,double_softmax
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 100 $f bench --backend cuda --op $OPS --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r47.tar.xz r47 && rm -rf r47
