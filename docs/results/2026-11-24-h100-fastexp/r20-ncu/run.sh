#!/usr/bin/env bash
# device call 20: ncu's view of the streamed and one-block-per-SM row
# kernels (63eb670): speed of light, memory, warp stalls, occupancy.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r20; mkdir -p $O
timeout 400 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  -k regex:_fused $B/fuseport check --backend cuda --op double_softmax,layernorm,softmax,norm_chain --variant fused \
  --shapes 4096x32768,512x16384,128x65536,2048x65536 --sample-elems 1048576 --seed 1 --quiet >$O/ncu.txt 2>$O/ncu.err
echo "ncu: exit $?"; grep -c 'Duration' $O/ncu.txt
echo "elapsed $SECONDS"
cd $OUT && tar cJf r20.tar.xz r20 && rm -rf r20
