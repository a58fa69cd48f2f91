#!/usr/bin/env bash
# device call 25: the record at 6285584: GPU tests, checks, sanitizers, the
# CUDA seed grid and PyTorch eager/compile on the same grid.
set -u
. .gpu/gpu-env.sh
rm -f .gpu/bin/fuseport-*
tar xJf .gpu/exp.tar.xz -C .gpu/bin
OUT=$OUT/rec DEADLINE=570 RESERVE=250 TORCH_ARGS="--rep-ms 10" bash bench/gpu_session.sh tests check sanitize bench-cuda torch
echo "elapsed $SECONDS"
cd $OUT && tar cJf rec.tar.xz rec && rm -rf rec
