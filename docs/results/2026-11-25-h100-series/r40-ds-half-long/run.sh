#!/usr/bin/env bash
# device call 40: double_softmax with stream_half_long (the streaming build
# in blocks of 512 for >= 3 rows per SM of 8193..16384 floats), now that
# its streamed rows take two reads, against af84030; three rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r40; mkdir -p $O
$B/fuseport check --backend cuda --op double_softmax --shapes 400x8193,1000x10240,600x16384,3000x12289 --seed 41 2>&1 | tail -1
SH=400x16384,512x16384,1024x16384,2048x16384,4096x16384,8192x16384,16384x16384,600x10240,3000x12289,8192x10240,1024x12288
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 120 $f bench --backend cuda --op double_softmax --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
echo "elapsed $SECONDS"
cd $OUT && tar cJf r40.tar.xz r40 && rm -rf r40
