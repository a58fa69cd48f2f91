#!/usr/bin/env bash
# Prepares, on the build machine, what bench/gpu_session.sh needs on a lent
# GPU machine, which has no registries: run from the repo root, then pass
# carry [".gpu", ".debs"] to the device tool (64 MiB in all).
#
#   .gpu/gpu-env.sh  from ../shared/device: registers NVIDIA's OpenCL driver
#                    and unpacks .debs (its comments say how)
#   .debs/           the Debian packages the GPU image lacks (CLBlast,
#                    cmocka, cJSON, the OpenCL headers and loader)
#   .gpu/bin/        fuseport, test_ops and test_backend for sm_90, and
#                    fuseport-base built from BASE (the commit before the
#                    OpenCL row-kernel specialisations and the float4
#                    bias_dropout_add rewrite) for the 'clrows' stage; stripped
#
# Environment: BASE (default de6a71f), SHARED (default ../shared), BUILD
# (default build-gpu), JOBS.
set -euo pipefail
BASE=${BASE:-de6a71f}
SHARED=${SHARED:-../shared}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
log() { echo "== $*"; }

mkdir -p .gpu/bin .debs
cp "$SHARED/device/gpu-env.sh" .gpu/gpu-env.sh

log "Debian packages into .debs/"
(cd .debs && apt-get download -q libclblast1 libclblast-dev libcmocka0 libcmocka-dev libcjson1 \
  libcjson-dev ocl-icd-opencl-dev opencl-c-headers >/dev/null)

log "this tree for sm_90 in $BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$BUILD" -j "$JOBS" >/dev/null
cp "$BUILD/fuseport" "$BUILD/tests/test_ops" "$BUILD/tests/test_backend" .gpu/bin/

log "$BASE for sm_90 (fuseport-base)"
base_tree=$(mktemp -d /tmp/fp-base.XXXXXX)
trap 'git worktree remove --force "$base_tree" 2>/dev/null || true; rm -rf "$base_tree"' EXIT
git worktree add --detach "$base_tree" "$BASE" >/dev/null 2>&1
cmake -S "$base_tree" -B "$base_tree/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$base_tree/build" -j "$JOBS" --target fuseport >/dev/null
cp "$base_tree/build/fuseport" .gpu/bin/fuseport-base

strip .gpu/bin/*
du -sh .gpu .debs
total=$(du -sk .gpu .debs | awk '{s += $1} END {print s}')
if [ "$total" -gt $((64 * 1024)) ]; then
  echo "gpu_prepare: .gpu and .debs hold ${total} KiB, more than the 64 MiB the device tool carries" >&2
  exit 1
fi
log "ready: run bash bench/gpu_session.sh STAGE... with carry [\".gpu\", \".debs\"]"
