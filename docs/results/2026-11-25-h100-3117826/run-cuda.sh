#!/usr/bin/env bash
# device call 41: the record at 3117826 (HEAD): tests, checks, sanitizers,
# the CUDA seed grid and PyTorch.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-* .gpu/bin/fuseport .gpu/bin/fuseport.* .gpu/bin/test_ops .gpu/bin/test_backend
tar xJf .gpu/exp.tar.xz -C .gpu/bin
OUT=$OUT/rec DEADLINE=575 RESERVE=250 TORCH_ARGS="--rep-ms 10" bash bench/gpu_session.sh tests check sanitize bench-cuda torch
echo "elapsed $SECONDS"
