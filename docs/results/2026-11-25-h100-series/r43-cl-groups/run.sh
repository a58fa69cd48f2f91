#!/usr/bin/env bash
# device call 43: NVIDIA OpenCL row ops at N = 10240-16384, many rows:
# cached (default) against streamed in groups of 256/512/1024; three rounds.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
O=$OUT/r43; mkdir -p $O
SH=1024x16384,4096x16384,16384x16384,512x16384,4096x12288,8192x10240
OPS=double_softmax,softmax,layernorm,norm_chain,softmax_backward
FUSEPORT_OPENCL_ROWS_MAX_GROUP=512 FUSEPORT_OPENCL_STREAM_GROUP=512 $B/fuseport check --backend opencl --platform NVIDIA --op $OPS --shapes 300x16384,77x12289 2>&1 | tail -1
for r in 1 2 3; do
  for v in dflt s256 s512 s1024; do
    case $v in
      dflt) env=();;
      s256) env=(FUSEPORT_OPENCL_ROWS_MAX_GROUP=512 FUSEPORT_OPENCL_STREAM_GROUP=256);;
      s512) env=(FUSEPORT_OPENCL_ROWS_MAX_GROUP=512 FUSEPORT_OPENCL_STREAM_GROUP=512);;
      s1024) env=(FUSEPORT_OPENCL_ROWS_MAX_GROUP=512 FUSEPORT_OPENCL_STREAM_GROUP=1024);;
    esac
    env "${env[@]}" timeout 100 $B/fuseport bench --backend opencl --platform NVIDIA --op $OPS --variants fused --shapes $SH --rep-ms 20 --quiet --out $O/ab_all_$v$r.json
  done
  echo "[$SECONDS s] round $r"
done
cd $OUT && tar cJf r43.tar.xz r43 && rm -rf r43
