#!/usr/bin/env bash
# Prepares, on the build machine, what bench/gpu_session.sh needs on a lent
# GPU machine, which has no registries: run from the repo root, then pass
# carry [".gpu", ".debs"] to the device tool (64 MiB in all).
#
#   .gpu/gpu-env.sh  from ../shared/device: registers NVIDIA's OpenCL driver
#                    and unpacks .debs (its comments say how)
#   .debs/           the Debian packages the GPU image lacks (CLBlast,
#                    cmocka, cJSON, the OpenCL headers and loader)
#   .gpu/bin/        fuseport, test_ops and test_backend of this tree for
#                    sm_90, stripped, beside the shared libfuseport.so they
#                    link (the CUDA kernels once rather than in each binary:
#                    tens of MB of GEMM instantiations)
#
# Environment: SHARED (default ../shared), BUILD (default build-gpu), JOBS.
set -euo pipefail
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
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DFUSEPORT_SHARED=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" >/dev/null
rm -f .gpu/bin/*
cp "$BUILD/fuseport" "$BUILD/tests/test_ops" "$BUILD/tests/test_backend" "$BUILD/libfuseport.so" \
  .gpu/bin/

strip .gpu/bin/*
du -sh .gpu .debs
total=$(du -sk .gpu .debs | awk '{s += $1} END {print s}')
if [ "$total" -gt $((64 * 1024)) ]; then
  echo "gpu_prepare: .gpu and .debs hold ${total} KiB, more than the 64 MiB the device tool carries" >&2
  exit 1
fi
log "ready: run bash bench/gpu_session.sh STAGE... with carry [\".gpu\", \".debs\"]"
