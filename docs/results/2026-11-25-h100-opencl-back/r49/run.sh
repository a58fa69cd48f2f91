#!/usr/bin/env bash
# device call 49: OpenCL streamed output passes: base (2981907), v1 (backwards,
# remainder loop), v2 (backwards, one predicated unrolled loop), v2fwd (v2
# built with -DFP_STREAM_BACK=0). NVIDIA OpenCL tests of v2, build logs,
# three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r49; mkdir -p $O
export FUSEPORT_OPENCL_PLATFORM=NVIDIA
$B/test_ops opencl >$O/test_ops-opencl.log 2>&1; echo "test_ops opencl: exit $?"; tail -1 $O/test_ops-opencl.log
$B/fuseport check --backend opencl --platform NVIDIA --op softmax,double_softmax,layernorm,norm_chain,softmax_backward --shapes 1x1,3x5,7x65537,5x100003,300x20001,40x32771,64x65536,33x10241,9x16385 --seed 49 >$O/check.log 2>&1; echo "check: exit $?"; tail -1 $O/check.log
for v in base v2; do
  f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
  FUSEPORT_OPENCL_BUILD_LOG=$O/build-$v.log FUSEPORT_OPENCL_BUILD_OPTIONS="-cl-nv-verbose" $f check --backend opencl --platform NVIDIA --quiet --op softmax,double_softmax,layernorm,norm_chain,softmax_backward --shapes 4x4 >/dev/null 2>&1
done
echo "[$SECONDS s] checks done"
RS=128x65536,256x32768,1024x32768,4096x32768,512x65536,2048x65536,2048x8192,8192x8192,2048x16384,8192x16384,1000x20001,4096x10240
for r in 1 2 3; do
  for v in base v1 v2 v2fwd; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base; [ $v = v1 ] && f=$B/fuseport.v1
    opt=; [ $v = v2fwd ] && opt="-DFP_STREAM_BACK=0"
    FUSEPORT_OPENCL_BUILD_OPTIONS="$opt" timeout 150 $f bench --backend opencl --platform NVIDIA --op softmax,layernorm,norm_chain,softmax_backward,double_softmax --variants fused --shapes $RS --rep-ms 20 --quiet --out $O/ab_rs_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r49.tar.xz r49 && rm -rf r49
