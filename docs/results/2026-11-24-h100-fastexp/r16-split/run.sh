#!/usr/bin/env bash
# device call 16: the reduce kernels' cluster builds streaming long rows
# (FUSEPORT_CUDA_ROW_SPLIT) and layernorm's x loads past L1: correctness
# with the split forced (tests, check, memcheck, racecheck), then timed:
# new (split off) against the previous binary and three split geometries.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r16; mkdir -p $O
CU=$(dirname "$(command -v nvcc)")
for f in fuseport fuseport.base; do
  $CU/cuobjdump -res-usage $B/$f 2>&1 | grep -A1 -E 'Function .*(cluster|long_rows)' | grep -E 'Function|REG' | paste - - | sed -E 's/.*Function ([^:]*):.*REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+) LOCAL:([0-9]+).*/\1 REG \2 STACK \3 LOCAL \5/' >$O/res_$f.txt
done
grep -E 'reduce|softmax|layernorm|norm_chain' $O/res_fuseport.txt | head -12
RO=softmax,double_softmax,softmax_backward,layernorm,norm_chain
for sp in 2 4:512 8:256; do
  FUSEPORT_CUDA_ROW_SPLIT=$sp timeout 150 $B/test_ops cuda >$O/test_ops_split${sp%%:*}.log 2>&1
  echo "test_ops split $sp: exit $? ($(grep -c '\[       OK \]' $O/test_ops_split${sp%%:*}.log) ok)"
  FUSEPORT_CUDA_ROW_SPLIT=$sp timeout 120 $B/fuseport check --backend cuda --quiet --op $RO \
    --shapes 66x30001,3x65537,130x40001,1x262144,7x131073,200x32769,40x16385 2>&1 | tail -2
done
timeout 100 $B/test_backend cuda >$O/test_backend.log 2>&1; echo "test_backend: exit $?"
timeout 150 $B/test_ops cuda >$O/test_ops.log 2>&1; echo "test_ops default: exit $?"
FUSEPORT_CUDA_ROW_SPLIT=2 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op $RO --shapes 66x30001,3x40001,1x262144 >$O/memcheck_split.log 2>&1
echo "memcheck split: exit $?"; tail -2 $O/memcheck_split.log
FUSEPORT_CUDA_ROW_SPLIT=2 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op $RO --shapes 40x16385,34x32769 >$O/racecheck_split.log 2>&1
echo "racecheck split: exit $?"; tail -2 $O/racecheck_split.log
echo "before variants: $SECONDS s"
SH=128x65536,256x32768,256x65536,512x32768,1024x16384,1024x65536,2048x8192,4096x16384,4096x32768,2048x65536
for r in 1 2; do
  for n in base new s2 s2h s4; do
    [ $SECONDS -gt 540 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op $RO --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
    echo "[$SECONDS s] $n round $r done"
  done
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r16.tar.xz r16 && rm -rf r16
