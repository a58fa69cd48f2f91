#!/usr/bin/env bash
# device call 29: (a) double_softmax's second exp kept in shared memory for
# the third pass: this tree (STREAM_SMEM 0, 1, all) against 096445f, three
# alternating rounds on streamed rows; (b) small and mid cells of every op,
# this tree against ef7f236 (the code of the previous record), three rounds:
# the record's small-cell shift is the machine or the change.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r29; mkdir -p $O/ds $O/small
$B/fuseport check --backend cuda --op double_softmax --shapes 66x30001,7x65537,3x262144,300x16385,130x40001,40x65537,100x65536,33x100003,5x32768 --seed 7 >$O/check_ds.log 2>&1; echo "check ds: exit $?"; tail -1 $O/check_ds.log
FUSEPORT_CUDA_STREAM_SMEM=all $B/fuseport check --backend cuda --op softmax,double_softmax,layernorm,norm_chain --shapes 66x30001,300x16385,130x20001,1000x3 --seed 8 >$O/check_all.log 2>&1; echo "check all: exit $?"; tail -1 $O/check_all.log
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/fuseport check --backend cuda --quiet --op double_softmax --shapes 40x65537,40x32769 >$O/racecheck_ds.log 2>&1; echo "racecheck ds: exit $?"; tail -2 $O/racecheck_ds.log
DS=256x32768,1024x32768,4096x32768,1024x20480,4096x24576,128x65536,512x65536,2048x65536,8192x65536,2048x40960,256x57344
for r in 1 2 3; do
  timeout 100 $B/fuseport.096 bench --backend cuda --op double_softmax --variants fused --shapes $DS --rep-ms 20 --quiet --out $O/ds/ab_ds_a$r.json
  for v in 0 1 all; do
    FUSEPORT_CUDA_STREAM_SMEM=$v timeout 100 $B/fuseport bench --backend cuda --op double_softmax --variants fused --shapes $DS --rep-ms 20 --quiet --out $O/ds/ab_ds_$v$r.json
  done
  echo "[$SECONDS s] ds round $r"
done
SM=128x128,256x256,128x2048,512x4096,2048x2048,1024x8192
for r in 1 2 3; do
  timeout 100 $B/fuseport.base bench --backend cuda --op all --variants fused --shapes $SM --rep-ms 20 --quiet --out $O/small/ab_all_a$r.json
  timeout 100 $B/fuseport bench --backend cuda --op all --variants fused --shapes $SM --rep-ms 20 --quiet --out $O/small/ab_all_b$r.json
  echo "[$SECONDS s] small round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r29.tar.xz r29 && rm -rf r29
