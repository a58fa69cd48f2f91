#!/usr/bin/env bash
# device call 17: double_softmax's second exp by __expf, layernorm's
# streamed w and b loads past L1: tests, checks over many seeds, memcheck,
# then timed against the previous binary, alternating, three rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r17; mkdir -p $O
timeout 150 $B/test_ops cuda >$O/test_ops.log 2>&1; echo "test_ops: exit $? ($(grep -c '\[       OK \]' $O/test_ops.log) ok)"
timeout 100 $B/test_backend cuda >$O/test_backend.log 2>&1; echo "test_backend: exit $?"
$B/fuseport check --backend cuda --op double_softmax,layernorm --shapes 1x1,3x3,1000x3,7x65537,2x262144,33x4097,66x30001,130x40001,300x1000,128x65536 --seed 1 >$O/check_seed1.log 2>&1; echo "check seed 1: exit $?"; tail -1 $O/check_seed1.log
fails=0
for s in $(seq 2 41); do
  $B/fuseport check --backend cuda --quiet --op double_softmax,layernorm --shapes 1000x3,7x65537,33x4097,66x30001,130x40001,300x1000,2x262144 --seed $s >>$O/check_seeds.log 2>&1 || fails=$((fails+1))
done
echo "40 seeds: $fails failing runs"; grep -c 'passed' $O/check_seeds.log; grep -m3 -i 'fail' $O/check_seeds.log
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax,layernorm --shapes 66x30001,3x40001,33x4097 >$O/memcheck.log 2>&1
echo "memcheck: exit $?"; tail -1 $O/memcheck.log
RO=double_softmax,layernorm,softmax
SH=128x512,256x2048,1024x1024,65536x128,4096x4096,128x65536,256x32768,256x65536,512x32768,1024x16384,1024x65536,2048x8192,4096x16384,4096x32768,2048x65536
for r in 1 2 3; do
  for n in base new; do
    [ $SECONDS -gt 500 ] && break 2
    f=$B/fuseport-$n; [ $n = new ] && f=$B/fuseport
    timeout 90 $f bench --backend cuda --op $RO --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/var_$n$r.json || echo "$n $r: exit $?"
    echo "[$SECONDS s] $n round $r done"
  done
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r17.tar.xz r17 && rm -rf r17
