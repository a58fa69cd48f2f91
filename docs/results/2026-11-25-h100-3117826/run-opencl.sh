#!/usr/bin/env bash
# device call 45: the NVIDIA OpenCL seed grid at d9da24a (OpenCL row groups
# of 512), with test_ops/test_backend and check on NVIDIA OpenCL first.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
mkdir -p $OUT/cl
for t in test_ops test_backend; do
  FUSEPORT_OPENCL_PLATFORM=NVIDIA .gpu/bin/$t opencl >$OUT/cl/$t-opencl.log 2>&1
  echo "$t NVIDIA OpenCL: exit $?"; sed -n 2p $OUT/cl/$t-opencl.log; tail -1 $OUT/cl/$t-opencl.log
done
.gpu/bin/fuseport check --backend opencl --platform NVIDIA > $OUT/cl/check-opencl.log 2>&1; tail -1 $OUT/cl/check-opencl.log
OUT=$OUT/cl DEADLINE=400 RESERVE=10 bash bench/gpu_session.sh bench-opencl
echo "elapsed $SECONDS"
