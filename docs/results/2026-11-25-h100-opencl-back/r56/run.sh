#!/usr/bin/env bash
# device call 56: _local_back with a prefix of 10240 floats (48 KiB of local
# memory; working tree on 05513eb) against f9f9347 (8192 floats):
# NVIDIA OpenCL tests, checks, build log, three alternating rounds, then the
# NVIDIA OpenCL seed grid of the working tree.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r56; mkdir -p $O
export FUSEPORT_OPENCL_PLATFORM=NVIDIA
for t in test_ops test_backend; do
  $B/$t opencl >$O/$t-opencl.log 2>&1; echo "$t NVIDIA OpenCL: exit $?"; tail -1 $O/$t-opencl.log
done
$B/fuseport check --backend opencl --platform NVIDIA --op softmax,norm_chain,double_softmax --shapes 3x5,7x65537,5x100003,40x32771,64x65536,33x32768,2x1048577,300x40001 --seed 54 >$O/check-odd.log 2>&1; echo "check odd: exit $?"; tail -1 $O/check-odd.log
FUSEPORT_OPENCL_BUILD_LOG=$O/build.log FUSEPORT_OPENCL_BUILD_OPTIONS="-cl-nv-verbose" $B/fuseport check --backend opencl --platform NVIDIA --quiet --op softmax --shapes 4x4 >/dev/null 2>&1
grep -A3 "softmax_fused_local_back'" $O/build.log | grep -E "spill|Used" | head -4
echo "[$SECONDS s] checks done"
RS=128x65536,256x32768,256x65536,1024x32768,4096x32768,16384x32768,512x65536,2048x65536,8192x65536,300x40001,64x262144,4096x16384
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 150 $f bench --backend opencl --platform NVIDIA --op softmax,norm_chain --variants fused --shapes $RS --rep-ms 20 --quiet --out $O/ab_rs_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
unset FUSEPORT_OPENCL_PLATFORM
mkdir -p $O/cl
$B/fuseport check --backend opencl --platform NVIDIA > $O/cl/check-opencl.log 2>&1; tail -1 $O/cl/check-opencl.log
OUT=$O/cl DEADLINE=$((590 - SECONDS)) RESERVE=10 bash bench/gpu_session.sh bench-opencl
echo "elapsed $SECONDS"
cd $OUT && tar cJf r56.tar.xz r56 && rm -rf r56
