#!/usr/bin/env bash
# device call 34: HEAD (2a4f8d3, the shared-memory opt-in helper) checked:
# tests, checks, both sanitizers, streamed shapes with rows kept.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
B=.gpu/bin
OUT=$OUT/r34 DEADLINE=200 bash bench/gpu_session.sh tests check sanitize
$B/fuseport check --backend cuda --op softmax,double_softmax,layernorm,norm_chain,softmax_backward --shapes 130x40001,40x65537,1000x10240,300x20000,8x131073 --seed 12 2>&1 | tail -1
FUSEPORT_CUDA_STREAM_SMEM=all $B/fuseport check --backend cuda --op softmax,double_softmax,layernorm,norm_chain --shapes 300x20000,66x30001 --seed 13 2>&1 | tail -1
FUSEPORT_CUDA_STREAM_SMEM=x $B/fuseport check --backend cuda --op softmax --shapes 3x5 2>&1 | tail -2
$B/fuseport bench --backend cuda --op softmax,layernorm --variants fused --shapes 2048x65536,8192x10240 --rep-ms 20 --quiet --out $OUT/r34/bench.json; echo "bench exit $?"
echo "elapsed $SECONDS"
