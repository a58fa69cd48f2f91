#!/usr/bin/env bash
# device call 48: OpenCL bias_gelu flat-quad walk, narrow divisions, streamed
# output passes written backwards (working tree on 2981907) against 2981907:
# NVIDIA OpenCL tests and checks, three alternating rounds (new, base, and new
# built with -DFP_STREAM_BACK=0).
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r48; mkdir -p $O
export FUSEPORT_OPENCL_PLATFORM=NVIDIA
$B/test_ops opencl >$O/test_ops-opencl.log 2>&1; echo "test_ops opencl: exit $?"; tail -1 $O/test_ops-opencl.log
$B/test_backend opencl >$O/test_backend-opencl.log 2>&1; echo "test_backend opencl: exit $?"; tail -1 $O/test_backend-opencl.log
$B/fuseport check --backend opencl --platform NVIDIA --op bias_gelu,bias_dropout_add,softmax,double_softmax,layernorm,norm_chain,softmax_backward --shapes 1x1,3x5,7x65537,1000x1002,33x4100,5x100003,300x20001,40x32771,64x65536 --seed 48 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
echo "[$SECONDS s] checks done"
EL=128x128,1024x1024,1024x2048,1024x4096,512x16384,4096x2048,65536x128,1024x16384,4096x8192,1000x1002,4096x4100
RS=128x65536,256x32768,1024x32768,4096x32768,512x65536,2048x65536,2048x16384,1000x20001,4096x10240,8192x16384
for r in 1 2 3; do
  for v in base new newfwd; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    opt=; [ $v = newfwd ] && opt="-DFP_STREAM_BACK=0"
    FUSEPORT_OPENCL_BUILD_OPTIONS="$opt" timeout 120 $f bench --backend opencl --platform NVIDIA --op bias_gelu,bias_dropout_add --variants fused --shapes $EL --rep-ms 20 --quiet --out $O/ab_el_$v$r.json
    FUSEPORT_OPENCL_BUILD_OPTIONS="$opt" timeout 150 $f bench --backend opencl --platform NVIDIA --op softmax,layernorm,norm_chain,softmax_backward,double_softmax --variants fused --shapes $RS --rep-ms 20 --quiet --out $O/ab_rs_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r48.tar.xz r48 && rm -rf r48
