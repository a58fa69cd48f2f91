#!/usr/bin/env bash
# device call 57: bias_gelu's and bias_dropout_add's column walk through one
# helper (fp_cols, working tree on 33d4391) against 9e52ad8: NVIDIA OpenCL
# tests and checks, three alternating rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r57; mkdir -p $O
export FUSEPORT_OPENCL_PLATFORM=NVIDIA
for t in test_ops test_backend; do
  $B/$t opencl >$O/$t-opencl.log 2>&1; echo "$t NVIDIA OpenCL: exit $?"; tail -1 $O/$t-opencl.log
done
$B/fuseport check --backend opencl --platform NVIDIA --op bias_gelu,bias_dropout_add --shapes 1x1,3x5,1000x1002,33x4100,7x65536,4096x4100 --seed 57 >$O/check-odd.log 2>&1; echo "check odd: exit $?"; tail -1 $O/check-odd.log
EL=128x128,1024x1024,1024x2048,1024x4096,512x16384,4096x2048,65536x128,1024x16384,4096x8192,4096x4100
for r in 1 2 3; do
  for v in base new; do
    f=$B/fuseport; [ $v = base ] && f=$B/fuseport.base
    timeout 120 $f bench --backend opencl --platform NVIDIA --op bias_gelu,bias_dropout_add --variants fused --shapes $EL --rep-ms 20 --quiet --out $O/ab_el_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r57.tar.xz r57 && rm -rf r57
