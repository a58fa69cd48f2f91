#!/usr/bin/env bash
# device call 54: double_softmax _local_back (long rows' first 6144 floats in
# local memory beside the wide slots; working tree on f9f9347) against
# f9f9347: NVIDIA OpenCL tests, checks, build log, three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r54; mkdir -p $O
export FUSEPORT_OPENCL_PLATFORM=NVIDIA
for t in test_ops test_backend; do
  $B/$t opencl >$O/$t-opencl.log 2>&1; echo "$t NVIDIA OpenCL: exit $?"; tail -1 $O/$t-opencl.log
done
$B/fuseport check --backend opencl --platform NVIDIA --op double_softmax,softmax,norm_chain --shapes 3x5,7x65537,5x100003,40x32771,64x65536,33x32768,2x1048577,300x40001 --seed 54 >$O/check-odd.log 2>&1; echo "check odd: exit $?"; tail -1 $O/check-odd.log
FUSEPORT_OPENCL_BUILD_LOG=$O/build.log FUSEPORT_OPENCL_BUILD_OPTIONS="-cl-nv-verbose" $B/fuseport check --backend opencl --platform NVIDIA --quiet --op double_softmax --shapes 4x4 >/dev/null 2>&1
grep -A3 "double_softmax_fused_local_back'" $O/build.log | grep -E "spill|Used" | head -4
echo "[$SECONDS s] checks done"
RS=128x65536,256x32768,256x65536,1024x32768,4096x32768,16384x32768,512x65536,2048x65536,8192x65536,300x40001,64x262144,4096x16384
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 150 $f bench --backend opencl --platform NVIDIA --op double_softmax,softmax --variants fused --shapes $RS --rep-ms 20 --quiet --out $O/ab_rs_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r54.tar.xz r54 && rm -rf r54
