#!/usr/bin/env bash
# device call 42: the NVIDIA OpenCL seed grid at 3117826, right after the CUDA one.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
OUT=$OUT/cl DEADLINE=400 RESERVE=10 bash bench/gpu_session.sh bench-opencl
echo "elapsed $SECONDS"
