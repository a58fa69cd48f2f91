#!/usr/bin/env bash
# device call 50: 159ef40 (OpenCL bias_gelu flat walk; _stream_back) against
# 2981907: NVIDIA OpenCL tests and checks, three alternating rounds (new,
# base, new with FUSEPORT_OPENCL_STREAM_BACK=0), then the NVIDIA OpenCL seed
# grid of 159ef40.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r50; mkdir -p $O/cl
export FUSEPORT_OPENCL_PLATFORM=NVIDIA
for t in test_ops test_backend; do
  $B/$t opencl >$O/cl/$t-opencl.log 2>&1; echo "$t NVIDIA OpenCL: exit $?"; tail -1 $O/cl/$t-opencl.log
done
$B/fuseport check --backend opencl --platform NVIDIA > $O/cl/check-opencl.log 2>&1; echo "check: exit $?"; tail -1 $O/cl/check-opencl.log
$B/fuseport check --backend opencl --platform NVIDIA --op bias_gelu,bias_dropout_add,softmax,layernorm,norm_chain,softmax_backward,double_softmax --shapes 3x5,7x65537,1000x1002,5x100003,40x32771,64x65536,33x32768,2x1048577 --seed 50 >$O/check-odd.log 2>&1; echo "check odd: exit $?"; tail -1 $O/check-odd.log
echo "[$SECONDS s] checks done"
RS=128x65536,256x32768,1024x32768,4096x32768,512x65536,2048x65536,8192x16384,4096x10240
for r in 1 2 3; do
  for v in base new nob; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    sb=1; [ $v = nob ] && sb=0
    FUSEPORT_OPENCL_STREAM_BACK=$sb timeout 150 $f bench --backend opencl --platform NVIDIA --op softmax,layernorm,norm_chain,softmax_backward,double_softmax --variants fused --shapes $RS --rep-ms 20 --quiet --out $O/ab_rs_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
unset FUSEPORT_OPENCL_PLATFORM
OUT=$O/cl DEADLINE=$((590 - SECONDS)) RESERVE=10 bash bench/gpu_session.sh bench-opencl
echo "elapsed $SECONDS"
cd $OUT && tar cJf r50.tar.xz r50 && rm -rf r50
