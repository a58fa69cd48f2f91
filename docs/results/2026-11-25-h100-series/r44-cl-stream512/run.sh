#!/usr/bin/env bash
# device call 44: NVIDIA OpenCL row kernels streaming rows of 8193..16384
# floats in groups of 512 (norm_chain's and double_softmax's teams of 1024
# dropped) against 3117826; tests, checks, three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp2.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r44; mkdir -p $O
$B/test_ops opencl >$O/test_ops.log 2>&1; echo "test_ops opencl: exit $?"; tail -1 $O/test_ops.log
$B/fuseport check --backend opencl --platform NVIDIA --op softmax,double_softmax,layernorm,norm_chain,softmax_backward,hreduce_pointwise,hreduce_reduce --shapes 300x16384,77x12289,4096x8193,5000x10000,3x16383,8x8195 --seed 44 2>&1 | tail -1
SH=512x16384,1024x16384,4096x16384,16384x16384,4096x12288,8192x10240,128x16384,4096x8192,1024x32768,4096x4096
OPS=double_softmax,softmax,layernorm,norm_chain,softmax_backward,hreduce_pointwise,hreduce_reduce
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 100 $f bench --backend opencl --platform NVIDIA --op $OPS --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r44.tar.xz r44 && rm -rf r44
