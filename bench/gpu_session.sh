#!/usr/bin/env bash
# One call on a lent GPU machine (the device tool): correctness, sanitizers
# and sweeps in as few calls as the lease allows. Run from the repo root:
#
#   bash bench/gpu_session.sh STAGE... 
#
# Stages: tests check sanitize rows clrows elem rowcap hreduce rowstage clab cllocal
#         clcap variants small icache lean bench-cuda bench-opencl torch
#   rows: the warp and cluster builds of the CUDA row kernels
#         (FUSEPORT_CUDA_ROW_BUILDS=tuned): tests, check and both sanitizers
#         on them, then the row ops timed with the block policy and with the
#         tuned one, alternately, in this call (rows_block.json,
#         rows_tuned.json, rows_compare.txt).
#   clrows: the OpenCL row kernels and their planned geometry on NVIDIA's
#         OpenCL: build log with registers and spills, tests, and the row ops
#         timed under several planner settings against the previous binary
#         and CUDA (cl_*.json, cl_compare.txt).
#   elem: the fused elementwise kernels under the tuned
#         FUSEPORT_CUDA_ELEM_GRID, tested and timed against the host's grid
#         (elem_*.json, elem_compare.txt).
#   rowcap: the CUDA row ops with the block of the block-per-row builds
#         capped (FUSEPORT_CUDA_ROWS_BLOCK_CAP), timed against the host's.
#   hreduce: the horizontal ops where they trailed torch.compile: checks,
#         sanitizers, then timed against the previous binary and compile
#         (new, base, compile, new, base).
#   rowstage: the CUDA long-row build's staging of the next row: checks,
#         sanitizers, then timed with it off and on (FUSEPORT_CUDA_ROW_STAGE).
#   clab: NVIDIA OpenCL row ops, this tree against the previous binary.
#   cllocal: the NVIDIA OpenCL _local row kernels (registers, spills), timed
#         with their row cache on and off, against CUDA.
#   clcap: NVIDIA OpenCL layernorm and double_softmax under three caps of
#         the cached team (FUSEPORT_OPENCL_ROWS_MAX_GROUP), against CUDA.
#   small: small and mid-size cells: ncu on both sides' kernels, the
#         elementwise ops under several ELEM grids and the row ops under
#         both row policies against fuseport-base, then torch.compile
#         (ES_OPS, ES_SHAPES, ES_GRIDS, RS_OPS, RS_SHAPES).
#   icache: ncu's warp stall reasons (cold instruction fetch) and small
#         elementwise cells for this build and every .gpu/bin/fuseport-*
#         (IC_SHAPES, IC_ROUNDS), then torch.compile.
#   lean: the lean ELEM builds (FUSEPORT_CUDA_ELEM_BUILDS): tests, checks,
#         memcheck, ncu against the registered builds, then timed against
#         them under several grids (LEAN_GRIDS, LEAN_SHAPES, LEAN_ROUNDS),
#         then torch.compile.
#   variants: every .gpu/bin/fuseport-* build against this one, alternating
#         (VAR_OPS, VAR_SHAPES, VAR_ROUNDS), then torch.compile.
# Environment: OUT (where results go; the device tool sets it), DEADLINE
# (seconds this call may use, default 570), FP (a fuseport binary; default
# .gpu/bin/fuseport, built here on this machine's image, else a fresh build),
# RESUME_DIR (a directory of partial result files from an earlier call, to
# --resume; unset: every sweep starts afresh), FUSEPORT_CUDA_ROW_BUILDS
# (passed through to every stage: block or tuned), SWEEP_OPS (the ops of the
# bench-* sweeps; default all), BENCH_ARGS (more options of the bench-*
# sweeps, e.g. --flush read) and TORCH_ARGS (of torch_bench.py's, e.g.
# --rep-ms 10 --flush read).
#
# It expects .gpu/gpu-env.sh (copied from ../shared/device) and the Debian
# packages in .debs/ to be carried along: bench/gpu_prepare.sh gathers them
# and builds .gpu/bin; see README "Running on a GPU".
set -u
OUT=${OUT:-/tmp/fp-out}
DEADLINE=${DEADLINE:-570}
RESUME_DIR=${RESUME_DIR:-}
mkdir -p "$OUT"
. .gpu/gpu-env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=${BIN:-.gpu/bin}
FP=${FP:-$BIN/fuseport}
log() { echo "== [$SECONDS s] $*"; }
left() { echo $((DEADLINE - SECONDS)); }

if ! "$FP" list >/dev/null 2>&1; then
  log "carried binary does not run here; building"
  cmake -S . -B /tmp/fp-build -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build /tmp/fp-build -j16 >/dev/null || { log "build failed"; exit 1; }
  FP=/tmp/fp-build/fuseport
  BIN=/tmp/fp-build/tests
fi
# torch_bench.py stamps its results with this, not with the copied tree's git
FUSEPORT_GIT_COMMIT=$("$FP" --version | sed -n 's/.*(\(.*\)).*/\1/p')
export FUSEPORT_GIT_COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
"$FP" list | sed -n '1,6p'

stage_tests() {
  log "cmocka tests on cuda and on NVIDIA OpenCL"
  for b in cuda opencl; do
    for t in test_backend test_ops; do
      FUSEPORT_OPENCL_PLATFORM=NVIDIA timeout 120 "$BIN/$t" "$b" >"$OUT/$t-$b.log" 2>&1
      echo "$t $b: exit $? ($(grep -c '\[       OK \]' "$OUT/$t-$b.log") ok," \
        "$(grep -c '\[  FAILED  \]' "$OUT/$t-$b.log") failed lines)"
    done
  done
  cat "$OUT"/test_*-*.log >"$OUT/tests.log" && rm -f "$OUT"/test_*-*.log
}

stage_check() {
  log "fuseport check --backend cuda"
  "$FP" check --backend cuda --quiet | tail -3
  log "fuseport check --backend opencl --platform NVIDIA"
  "$FP" check --backend opencl --platform NVIDIA --quiet | tail -3
}

stage_sanitize() {
  log "compute-sanitizer memcheck: fuseport check --backend cuda (small shapes)"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --shapes 3x1000,7x65537,33x4097,70x3001,530x1030,1000x3,40x32769,40x65537 >"$OUT/memcheck.log" 2>&1
  echo "memcheck exit $?"; tail -4 "$OUT/memcheck.log"
  log "compute-sanitizer racecheck: row reductions and the transposed tile"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --shapes 3x1000,33x4097,70x3001,40x32769,40x65537 \
    --op softmax,double_softmax,softmax_backward,layernorm,norm_chain,hreduce_pointwise,hreduce_reduce,bias_dropout_add \
    >"$OUT/racecheck.log" 2>&1
  echo "racecheck exit $?"; tail -4 "$OUT/racecheck.log"
}

# A seed-grid sweep that stops cleanly before the deadline and resumes a
# partial file from an earlier call.
sweep() {
  local backend=$1 file=$2
  shift 2
  local budget=$(($(left) - ${RESERVE:-15}))
  [ "$budget" -gt 30 ] || { log "no time left for $backend"; return; }
  log "seed sweep on $backend for at most $budget s"
  if [ -n "$RESUME_DIR" ] && [ -f "$RESUME_DIR/$file" ]; then
    cp "$RESUME_DIR/$file" "$OUT/$file"
    timeout -s INT -k 20 "$budget" "$FP" bench --resume "$OUT/$file" --quiet
  else
    timeout -s INT -k 20 "$budget" "$FP" bench --backend "$backend" "$@" --op "${SWEEP_OPS:-all}" \
      --shapes seed --rep-ms 20 ${BENCH_ARGS:-} --out "$OUT/$file" --quiet
  fi
  echo "bench exit $?; cells: $(grep -c '"op":' "$OUT/$file")"
}

# The builds to compare: this one ("new") and every .gpu/bin/fuseport-NAME,
# into the caller's arrays `names` and `bins`.
collect_builds() {
  names=(new) bins=("$FP")
  local f
  for f in "$BIN"/fuseport-*; do
    [ -x "$f" ] && { names+=("${f##*/fuseport-}"); bins+=("$f"); }
  done
}

# alternate ROUNDS PREFIX ARGS...: each build of collect_builds in turn, ROUNDS
# rounds, running `fuseport ARGS... --out $OUT/PREFIX<name><round>.json`.
alternate() {
  local rounds=$1 prefix=$2 r i
  shift 2
  for r in $(seq 1 "$rounds"); do
    log "round $r: ${names[*]}"
    for i in "${!bins[@]}"; do
      timeout 100 "${bins[$i]}" "$@" --out "$OUT/$prefix${names[$i]}$r.json" ||
        echo "${names[$i]} round $r: exit $?"
    done
  done
}

ROW_OPS=softmax,double_softmax,softmax_backward,layernorm,norm_chain,hreduce_pointwise,hreduce_reduce
# Shapes for each build: many short rows (warp builds), mid rows, few long
# rows (clusters), and large cells of each kind.
ROW_SHAPES=1x65536,8x65536,16x32768,30x12000,33x4097,65536x128,65536x256,65536x512,32768x1024,16384x2048,8192x4096,128x8192,512x16384,128x32768,256x32768,128x65536,1024x65536,4096x16384,8192x8192,4096x4096,1000x3,70x509,66x30001,5x65537

stage_rows() {
  local shapes=3x1000,1000x3,70x509,33x4097,30x12000,66x30001,5x65537,16x4096,8x8192
  log "tuned row builds: tests and check"
  for t in test_backend test_ops; do
    FUSEPORT_CUDA_ROW_BUILDS=tuned timeout 200 "$BIN/$t" cuda >"$OUT/$t-tuned.log" 2>&1
    echo "$t cuda tuned: exit $? ($(grep -c '\[       OK \]' "$OUT/$t-tuned.log") ok," \
      "$(grep -c '\[  FAILED  \]' "$OUT/$t-tuned.log") failed lines)"
  done
  FUSEPORT_CUDA_ROW_BUILDS=tuned "$FP" check --backend cuda --quiet | tail -3
  log "tuned row builds: memcheck and racecheck"
  FUSEPORT_CUDA_ROW_BUILDS=tuned timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$FP" check --backend cuda --quiet --shapes $shapes --op $ROW_OPS >"$OUT/memcheck-tuned.log" 2>&1
  echo "memcheck exit $?"; tail -2 "$OUT/memcheck-tuned.log"
  FUSEPORT_CUDA_ROW_BUILDS=tuned timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$FP" check --backend cuda --quiet --shapes $shapes --op $ROW_OPS --variant fused \
    >"$OUT/racecheck-tuned.log" 2>&1
  echo "racecheck exit $?"; tail -2 "$OUT/racecheck-tuned.log"
  log "row ops: block policy vs tuned, same call"
  for policy in block tuned; do
    FUSEPORT_CUDA_ROW_BUILDS=$policy timeout 150 "$FP" bench --backend cuda --op $ROW_OPS \
      --variants fused --shapes $ROW_SHAPES --rep-ms 10 --out "$OUT/rows_$policy.json" --quiet
    echo "$policy: exit $?"
  done
  "$FP" compare "$OUT/rows_block.json" "$OUT/rows_tuned.json" >"$OUT/rows_compare.txt"
  grep -E "^==|geometric" "$OUT/rows_compare.txt"
}

# The OpenCL row kernels on NVIDIA's OpenCL: the register and spill report
# of the default build (and FP_ROW_VEC=v for each v of CL_BUILD_VECS, e.g.
# "4 2"), the tests with the planned and
# the host geometry, then the row ops and bias_dropout_add timed under each
# planner setting of CL_CONFIGS (environment assignments; "default": none),
# the previous binary ($BIN/fuseport-base, gpu_prepare.sh's BASE) and CUDA,
# all in this call (cl_<name>.json, cl_compare.txt: every config against
# CUDA).
# CL_CONFIGS=all adds the previous planner and the generic kernels.
if [ "${CL_CONFIGS:-default}" = all ]; then
  CL_CONFIGS=(
    "default"
    "prev:FUSEPORT_OPENCL_ROWS_MAX_GROUP=1024 FUSEPORT_OPENCL_STREAM_GROUP=1024"
    "generic:FUSEPORT_OPENCL_ROW_VARIANTS=0"
  )
else
  CL_CONFIGS=("default")
fi
stage_clrows() {
  local ops=$ROW_OPS,bias_dropout_add
  log "NVIDIA OpenCL build log (-cl-nv-verbose): registers and spills"
  rm -f "$OUT/cl-build.log"
  for vec in ${CL_BUILD_VECS:-4}; do
    FUSEPORT_OPENCL_ROW_VEC=$vec FUSEPORT_OPENCL_BUILD_LOG="$OUT/cl-build.log" \
      FUSEPORT_OPENCL_BUILD_OPTIONS="-cl-nv-verbose" "$FP" check --backend opencl \
      --platform NVIDIA --quiet --op $ops --shapes 3x1000 | tail -1
  done
  grep -iE "^== |Compiling entry|spill|Used [0-9]+ registers" "$OUT/cl-build.log" |
    awk '/^== /{print; next} /Compiling entry/{k=$7} /spill/{s=$7" B spill stores, "$11" B spill loads"}
      /Used/{print k, $5, "registers,", s}'
  log "tests on NVIDIA OpenCL: planned geometry, then host geometry with a 1-vector cache"
  FUSEPORT_OPENCL_PLATFORM=NVIDIA timeout 200 "$BIN/test_ops" opencl >"$OUT/cl-planned.log" 2>&1
  echo "planned: exit $? ($(grep -c '\[  FAILED  \]' "$OUT/cl-planned.log") failed lines)"
  FUSEPORT_OPENCL_PLATFORM=NVIDIA FUSEPORT_OPENCL_HOST_GEOMETRY=1 \
    FUSEPORT_OPENCL_ROW_VEC=1 timeout 200 "$BIN/test_ops" opencl \
    >"$OUT/cl-streaming.log" 2>&1
  echo "streaming: exit $? ($(grep -c '\[  FAILED  \]' "$OUT/cl-streaming.log") failed lines)"
  log "row ops on NVIDIA OpenCL under each planner setting; previous binary; CUDA"
  local b=(bench --op $ops --variants fused --shapes $ROW_SHAPES --rep-ms 10 --quiet)
  timeout 120 "$FP" "${b[@]}" --backend cuda --out "$OUT/cl_cuda.json"
  echo "cuda: exit $?"
  if [ -x "$BIN/fuseport-base" ]; then
    timeout 150 "$BIN/fuseport-base" "${b[@]}" --backend opencl --platform NVIDIA \
      --out "$OUT/cl_base.json"
    echo "base: exit $?"
  fi
  local c name assigns
  for c in "${CL_CONFIGS[@]}"; do
    name=${c%%:*}
    assigns=""
    [ "$c" != "$name" ] && assigns=${c#*:}
    [ "$(left)" -gt 60 ] || { log "no time left for $name"; break; }
    env $assigns timeout 150 "$FP" "${b[@]}" --backend opencl --platform NVIDIA \
      --out "$OUT/cl_$name.json"
    echo "$name ($assigns): exit $?"
  done
  {
    for f in "$OUT"/cl_*.json; do
      [ "$f" = "$OUT/cl_cuda.json" ] || "$FP" compare "$f" "$OUT/cl_cuda.json"
    done
  } >"$OUT/cl_compare.txt" 2>&1
  grep -E "^A = |^==|geometric" "$OUT/cl_compare.txt"
}

# The grid of the fused elementwise kernels (FUSEPORT_CUDA_ELEM_GRID): the
# tuned default tested, then timed against the host's grid in this call
# (64 MiB cells, where a fixed cost shows, and large ones).
ELEM_OPS=pointwise_chain,bias_gelu,bias_dropout_add
ELEM_SHAPES=2048x4096,1024x8192,4096x4096,8192x8192,65536x4096,16384x65536,128x65536,65536x128,512x512
stage_elem() {
  local policy
  timeout 120 "$BIN/test_ops" cuda >"$OUT/elem-tuned.log" 2>&1
  echo "test_ops cuda, elem grid tuned: exit $?" \
    "($(grep -c '\[  FAILED  \]' "$OUT/elem-tuned.log") failed lines)"
  for policy in host tuned; do
    FUSEPORT_CUDA_ELEM_GRID=$policy timeout 100 "$FP" bench --backend cuda --op $ELEM_OPS \
      --variants fused --shapes $ELEM_SHAPES --rep-ms 10 --quiet --out "$OUT/elem_${policy/:/}.json"
    echo "elem grid $policy: exit $?"
  done
  "$FP" compare "$OUT/elem_host.json" "$OUT/elem_tuned.json" >"$OUT/elem_compare.txt" 2>&1
  grep -E "^==|geometric" "$OUT/elem_compare.txt"
}

# The block of the CUDA block-per-row builds (FUSEPORT_CUDA_ROWS_BLOCK_CAP):
# the host's N/16 threads against caps of 512, 256 and 128, timed in this
# call (rowcap_*.json, rowcap_compare.txt).
stage_rowcap() {
  local cap
  log "CUDA row ops: block caps"
  for cap in host 512 256 128; do
    if [ $cap = host ]; then
      env -u FUSEPORT_CUDA_ROWS_BLOCK_CAP timeout 100 "$FP" bench --backend cuda --op $ROW_OPS \
        --variants fused --shapes $ROW_SHAPES --rep-ms 10 --quiet --out "$OUT/rowcap_host.json"
    else
      FUSEPORT_CUDA_ROWS_BLOCK_CAP=$cap timeout 100 "$FP" bench --backend cuda --op $ROW_OPS \
        --variants fused --shapes $ROW_SHAPES --rep-ms 10 --quiet --out "$OUT/rowcap_$cap.json"
    fi
    echo "cap $cap: exit $?"
  done
  FUSEPORT_CUDA_ROWS_BLOCK_CAP=128 timeout 100 "$FP" check --backend cuda --quiet --op $ROW_OPS |
    tail -1
  for cap in 512 256 128; do
    "$FP" compare "$OUT/rowcap_host.json" "$OUT/rowcap_$cap.json"
  done >"$OUT/rowcap_compare.txt" 2>&1
  grep -E "^==|geometric" "$OUT/rowcap_compare.txt"
}

# The horizontal ops on the seed-grid cells where they trailed torch.compile
# (rows of 16384-65536, 512 rows or more): correctness and sanitizers on
# shapes that take hreduce_pointwise's 512-thread blocks, then this tree,
# the previous binary ($BIN/fuseport-base), torch.compile, this tree again
# and with its blocks capped at 256 threads, timed in this call (hr_*.json,
# hr_compare.txt).
HR_SHAPES=16384x2048,8192x4096,4096x8192,8192x8192,512x16384,1024x16384,2048x16384,4096x16384,8192x16384,16384x16384,32768x16384,65536x16384,512x32768,1024x32768,2048x32768,4096x32768,512x65536,1024x65536,2048x65536
stage_hreduce() {
  local ops=hreduce_pointwise,hreduce_reduce
  timeout 120 "$BIN/test_ops" cuda >"$OUT/hr-tests.log" 2>&1
  echo "test_ops cuda: exit $? ($(grep -c '\[  FAILED  \]' "$OUT/hr-tests.log") failed lines)"
  "$FP" check --backend cuda --quiet --op $ops --shapes 530x9000,600x16385,2048x16384 | tail -1
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --op $ops --variant fused --shapes 530x9000,529x16383 >"$OUT/hr-memcheck.log" 2>&1
  echo "memcheck exit $?"; tail -1 "$OUT/hr-memcheck.log"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --op $ops --variant fused --shapes 530x9000 >"$OUT/hr-racecheck.log" 2>&1
  echo "racecheck exit $?"; tail -1 "$OUT/hr-racecheck.log"
  local b=(bench --backend cuda --op $ops --variants fused --shapes $HR_SHAPES --rep-ms 20 --quiet)
  timeout 100 "$FP" "${b[@]}" --out "$OUT/hr_new.json"; echo "new: exit $?"
  [ -x "$BIN/fuseport-base" ] && { timeout 100 "$BIN/fuseport-base" "${b[@]}" --out "$OUT/hr_base.json"; echo "base: exit $?"; }
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_bench.py --ops $ops --shapes $HR_SHAPES \
    --modes compile --rep-ms 20 --out "$OUT/hr_torch.json" >"$OUT/hr_torch.log" 2>&1
  echo "torch compile: exit $?"
  timeout 100 "$FP" "${b[@]}" --out "$OUT/hr_new2.json"; echo "new, again: exit $?"
  [ -x "$BIN/fuseport-base" ] && { timeout 100 "$BIN/fuseport-base" "${b[@]}" --out "$OUT/hr_base2.json"; echo "base, again: exit $?"; }
  {
    [ -f "$OUT/hr_base.json" ] && "$FP" compare "$OUT/hr_base.json" "$OUT/hr_new.json"
    [ -f "$OUT/hr_base2.json" ] && "$FP" compare "$OUT/hr_base2.json" "$OUT/hr_new2.json"
    for f in hr_base hr_new hr_new2 hr_base2; do
      [ -f "$OUT/$f.json" ] && { echo "== $f against torch.compile"; "$FP" compare "$OUT/hr_torch.json" "$OUT/$f.json" --variant compile:fused; }
    done
  } >"$OUT/hr_compare.txt" 2>&1
  grep -E "^==|geometric" "$OUT/hr_compare.txt"
}

# The CUDA long-row build staging the next row in shared memory
# (FUSEPORT_CUDA_ROW_STAGE): checks and both sanitizers on shapes where the
# persistent blocks loop over several staged rows, then the row ops timed
# with the previous binary ($BIN/fuseport-base), the stage off and on, twice
# each, alternately, in this call (stage_{base,0,1}{a,b}.json,
# stage_compare.txt).
STAGE_OPS=softmax,double_softmax,softmax_backward,layernorm,norm_chain
STAGE_SHAPES=16384x512,8192x1024,4096x2048,2048x4096,1024x8192,512x16384,256x32768,65536x2048,32768x4096,8192x16384,4096x32768,4000x16383
stage_rowstage() {
  local shapes=2500x1001,300x8191,300x16383,3000x4095,1000x3
  log "row stage: tests and check (stage on, the default)"
  for t in test_backend test_ops; do
    timeout 200 "$BIN/$t" cuda >"$OUT/$t-stage.log" 2>&1
    echo "$t cuda: exit $? ($(grep -c '\[       OK \]' "$OUT/$t-stage.log") ok," \
      "$(grep -c '\[  FAILED  \]' "$OUT/$t-stage.log") failed lines)"
  done
  "$FP" check --backend cuda --quiet --op $STAGE_OPS --shapes $shapes,2000x16383,700x32768 | tail -2
  log "row stage: memcheck and racecheck"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --op $STAGE_OPS --variant fused --shapes $shapes >"$OUT/stage-memcheck.log" 2>&1
  echo "memcheck exit $?"; tail -2 "$OUT/stage-memcheck.log"
  timeout 250 compute-sanitizer --tool racecheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --op $STAGE_OPS --variant fused --shapes 2500x1001,300x8191,300x16383 \
    >"$OUT/stage-racecheck.log" 2>&1
  echo "racecheck exit $?"; tail -2 "$OUT/stage-racecheck.log"
  log "row ops: previous binary, stage off, stage on, twice, same call"
  local b=(bench --backend cuda --op $STAGE_OPS --variants fused --shapes $STAGE_SHAPES --rep-ms 10
    --quiet)
  local k v
  for k in a b; do
    if [ -x "$BIN/fuseport-base" ] && [ "$(left)" -gt 70 ]; then
      timeout 120 "$BIN/fuseport-base" "${b[@]}" --out "$OUT/stage_base$k.json"
      echo "base $k: exit $?"
    fi
    for v in 0 1; do
      [ "$(left)" -gt 70 ] || { log "no time left for stage $v$k"; break 2; }
      FUSEPORT_CUDA_ROW_STAGE=$v timeout 120 "$FP" "${b[@]}" --out "$OUT/stage_$v$k.json"
      echo "stage $v$k: exit $?"
    done
  done
  for k in a b; do
    [ -f "$OUT/stage_1$k.json" ] && "$FP" compare "$OUT/stage_0$k.json" "$OUT/stage_1$k.json"
    [ -f "$OUT/stage_base$k.json" ] && [ -f "$OUT/stage_1$k.json" ] &&
      "$FP" compare "$OUT/stage_base$k.json" "$OUT/stage_1$k.json"
  done >"$OUT/stage_compare.txt" 2>&1
  grep -E "^==|geometric" "$OUT/stage_compare.txt"
}

# NVIDIA OpenCL row ops, this tree against the previous binary
# ($BIN/fuseport-base), alternately twice, so that a slow spell of the GPU
# shows as a disagreement between the two rounds (clab_{base,new}{a,b}.json,
# clab_compare.txt).
stage_clab() {
  local b=(bench --backend opencl --platform NVIDIA --op softmax,double_softmax,layernorm,norm_chain
    --variants fused --shapes $ROW_SHAPES --rep-ms 10 --quiet)
  local k
  for k in a b; do
    [ "$(left)" -gt 60 ] || { log "no time left for round $k"; break; }
    timeout 100 "$BIN/fuseport-base" "${b[@]}" --out "$OUT/clab_base$k.json"
    echo "base $k: exit $?"
    timeout 100 "$FP" "${b[@]}" --out "$OUT/clab_new$k.json"
    echo "new $k: exit $?"
  done
  for k in a b; do
    [ -f "$OUT/clab_new$k.json" ] && "$FP" compare "$OUT/clab_base$k.json" "$OUT/clab_new$k.json"
  done >"$OUT/clab_compare.txt" 2>&1
  grep -E "^==|geometric" "$OUT/clab_compare.txt"
}

# NVIDIA OpenCL: the local-memory row cache of the _local row kernels.
# Their registers and spills (-cl-nv-verbose), then the four ops that have
# one timed with it (default) and without (FUSEPORT_OPENCL_ROW_LOCAL=0: the
# _stream kernels), alternately twice, on rows it takes (N of 4100-8195;
# layernorm's from 2052) and a few it leaves alone; CUDA once
# (cllocal_{on,off}{a,b}.json, cllocal_cuda.json, cllocal_compare.txt).
CLLOCAL_SHAPES=${CLLOCAL_SHAPES:-128x8192,1024x8192,4096x8192,8192x8192,16384x8192,32768x5000,4096x6000,8192x4100,33x8195,65536x2052,16384x3000,32768x4096,4096x4096,512x16384}
stage_cllocal() {
  local ops=softmax,double_softmax,layernorm,norm_chain
  log "NVIDIA OpenCL _local kernels: registers and spills"
  rm -f "$OUT/cllocal-build.log"
  FUSEPORT_OPENCL_BUILD_LOG="$OUT/cllocal-build.log" FUSEPORT_OPENCL_BUILD_OPTIONS="-cl-nv-verbose" \
    "$FP" check --backend opencl --platform NVIDIA --quiet --op $ops --shapes 3x1000,64x8192 | tail -1
  grep -iE "Compiling entry|spill|Used [0-9]+ registers" "$OUT/cllocal-build.log" |
    awk '/Compiling entry/{k=$7} /spill/{s=$7" B spill stores, "$11" B spill loads"}
      /Used/{print k, $5, "registers,", s}' | grep -E "_local|_stream"
  local b=(bench --op $ops --variants fused --shapes $CLLOCAL_SHAPES --rep-ms 10 --quiet)
  timeout 100 "$FP" "${b[@]}" --backend cuda --out "$OUT/cllocal_cuda.json"
  echo "cuda: exit $?"
  local k
  for k in a b; do
    [ "$(left)" -gt 60 ] || { log "no time left for round $k"; break; }
    FUSEPORT_OPENCL_ROW_LOCAL=0 timeout 100 "$FP" "${b[@]}" --backend opencl --platform NVIDIA \
      --out "$OUT/cllocal_off$k.json"
    echo "off $k: exit $?"
    timeout 100 "$FP" "${b[@]}" --backend opencl --platform NVIDIA --out "$OUT/cllocal_on$k.json"
    echo "on $k: exit $?"
  done
  for k in a b; do
    [ -f "$OUT/cllocal_on$k.json" ] || continue
    echo "== round $k: off against on"
    "$FP" compare "$OUT/cllocal_off$k.json" "$OUT/cllocal_on$k.json"
    echo "== round $k: cuda against on"
    "$FP" compare "$OUT/cllocal_cuda.json" "$OUT/cllocal_on$k.json"
    echo "== round $k: cuda against off"
    "$FP" compare "$OUT/cllocal_cuda.json" "$OUT/cllocal_off$k.json"
  done >"$OUT/cllocal_compare.txt" 2>&1
  grep -E "^==|geometric" "$OUT/cllocal_compare.txt"
}

# NVIDIA OpenCL: which rows to cache. The cached-team cap
# (FUSEPORT_OPENCL_ROWS_MAX_GROUP) at the default rule, 4 (stream all but
# rows of 64 floats) and 32, for the two row ops furthest behind CUDA on
# mid-length rows, alternately twice; CUDA once (clcap_*.json,
# clcap_compare.txt: each against CUDA).
CLCAP_SHAPES=65536x128,65536x256,65536x512,65536x1024,65536x2048,32768x4096,8192x128,8192x256,8192x512,8192x1024,8192x2048,8192x4096,1000x3,70x509
stage_clcap() {
  local b=(bench --op layernorm,double_softmax --variants fused --shapes $CLCAP_SHAPES --rep-ms 10
    --quiet)
  timeout 100 "$FP" "${b[@]}" --backend cuda --out "$OUT/clcap_cuda.json"
  echo "cuda: exit $?"
  local k cap
  for k in a b; do
    for cap in default 4 32; do
      [ "$(left)" -gt 40 ] || { log "no time left for $cap$k"; break 2; }
      if [ $cap = default ]; then
        env -u FUSEPORT_OPENCL_ROWS_MAX_GROUP timeout 100 "$FP" "${b[@]}" --backend opencl \
          --platform NVIDIA --out "$OUT/clcap_$cap$k.json"
      else
        FUSEPORT_OPENCL_ROWS_MAX_GROUP=$cap timeout 100 "$FP" "${b[@]}" --backend opencl \
          --platform NVIDIA --out "$OUT/clcap_$cap$k.json"
      fi
      echo "cap $cap$k: exit $?"
    done
  done
  for f in "$OUT"/clcap_[0-9d]*.json; do
    "$FP" compare "$f" "$OUT/clcap_cuda.json"
  done >"$OUT/clcap_compare.txt" 2>&1
  grep -E "^A = |^==|geometric" "$OUT/clcap_compare.txt"
}

# Build variants: every $BIN/fuseport-* binary (and $FP as "new") timed on
# VAR_OPS x VAR_SHAPES, VAR_ROUNDS rounds, the binaries alternating within
# each round, then torch.compile on the same cells (var_<name><round>.json,
# var_torch.json, var_compare.txt: each against base, and against compile).
VAR_OPS=${VAR_OPS:-hreduce_reduce}
VAR_SHAPES=${VAR_SHAPES:-$HR_SHAPES}
VAR_ROUNDS=${VAR_ROUNDS:-2}
stage_variants() {
  local b=(bench --backend cuda --op "$VAR_OPS" --variants fused --shapes "$VAR_SHAPES" --rep-ms 20 --quiet)
  local names bins r i
  collect_builds
  log "variants: ${names[*]} x $VAR_ROUNDS rounds"
  alternate "$VAR_ROUNDS" var_ "${b[@]}"
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch_bench.py --ops "$VAR_OPS" --shapes "$VAR_SHAPES" \
    --modes compile --rep-ms 20 --out "$OUT/var_torch.json" >"$OUT/var_torch.log" 2>&1
  echo "torch compile: exit $?"
  {
    for r in $(seq 1 "$VAR_ROUNDS"); do
      for i in "${!names[@]}"; do
        [ "${names[$i]}" = base ] && continue
        echo "== round $r: base against ${names[$i]}"
        "$FP" compare "$OUT/var_base$r.json" "$OUT/var_${names[$i]}$r.json"
        echo "== round $r: compile against ${names[$i]}"
        "$FP" compare "$OUT/var_torch.json" "$OUT/var_${names[$i]}$r.json" --variant compile:fused
      done
    done
  } >"$OUT/var_compare.txt" 2>&1
  grep -E "^== |overall" "$OUT/var_compare.txt"
}

# Small and mid-size cells, where torch.compile (timed with its issue time
# kept out of the events, d75abae) was 3-26% faster: ncu's view of both
# sides' kernels (grid, block, registers, instructions, duration), then the
# elementwise ops under several ELEM grids and the row ops under both row
# policies, each against .gpu/bin/fuseport-base, alternating, then compile.
ES_OPS=${ES_OPS:-pointwise_chain,bias_gelu,bias_dropout_add}
ES_SHAPES=${ES_SHAPES:-128x128,256x256,512x512,128x2048,1024x1024,512x4096,2048x2048,4096x2048,4096x4096,8192x4096,8192x8192,65536x128,128x65536}
ES_GRIDS=${ES_GRIDS:-items:1 items:2 items:4}
RS_OPS=${RS_OPS:-softmax,layernorm,hreduce_pointwise,hreduce_reduce}
RS_SHAPES=${RS_SHAPES:-128x128,128x512,128x2048,128x4096,128x8192,256x1024,256x4096,1024x1024}
# ncu's metrics of the small and icache stages: the launch, the work, the time
NCU_METRICS=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
NCU_METRICS=$NCU_METRICS,smsp__inst_executed.sum,sm__cycles_active.max
# compile_cells OPS SHAPES: torch.compile on those cells (s_torch.json) within
# the deadline, then small_summary.py over $OUT (the es_/rs_ files beside it).
compile_cells() {
  local budget=$(($(left) - 15))
  log "torch.compile on the same cells for at most $budget s"
  PYTHONUNBUFFERED=1 timeout -s INT -k 10 "$budget" python3 bench/torch_bench.py --ops "$1" \
    --shapes "$2" --modes compile --rep-ms 10 --out "$OUT/s_torch.json" >"$OUT/s_torch.log" 2>&1
  echo "torch: exit $?"
  python3 bench/probes/small_summary.py "$OUT" | tee "$OUT/small_summary.txt" | sed -n '1,60p'
}

stage_small() {
  local m=$NCU_METRICS,dram__bytes_read.sum,dram__bytes_write.sum
  local nshapes=128x128,512x512,1024x1024,2048x2048,128x2048
  local ncu=(timeout 150 ncu --clock-control none --csv --metrics "$m")
  log "ncu: fuseport (this build and base) and torch.compile on $nshapes"
  for b in new base; do
    local bin=$FP
    [ $b = base ] && bin=$BIN/fuseport-base
    "${ncu[@]}" -k regex:_fused "$bin" check --backend cuda --op "$ES_OPS,$RS_OPS" --variant fused \
      --shapes $nshapes --param training=false --param layout=contiguous --seed 1 --quiet \
      >"$OUT/ncu_$b.csv" 2>"$OUT/ncu_$b.err"
    echo "ncu $b: exit $?, $(grep -c '"gpu__time_duration.sum"' "$OUT/ncu_$b.csv") kernels"
  done
  PYTHONUNBUFFERED=1 "${ncu[@]}" --profile-from-start off -k regex:triton python3 bench/probes/ncu_torch.py \
    --ops "$ES_OPS,$RS_OPS" --shapes $nshapes >"$OUT/ncu_torch.csv" 2>"$OUT/ncu_torch.err"
  echo "ncu torch: exit $?, $(grep -c '"gpu__time_duration.sum"' "$OUT/ncu_torch.csv") kernels"

  local r g
  for r in 1 2; do
    log "round $r: elementwise, base / tuned / ${ES_GRIDS}"
    local eb=(bench --backend cuda --op "$ES_OPS" --variants fused --shapes "$ES_SHAPES" --rep-ms 10 --quiet)
    timeout 100 "$BIN/fuseport-base" "${eb[@]}" --out "$OUT/es_base$r.json" || echo "base: exit $?"
    timeout 100 "$FP" "${eb[@]}" --out "$OUT/es_new$r.json" || echo "new: exit $?"
    for g in $ES_GRIDS; do
      FUSEPORT_CUDA_ELEM_GRID=$g timeout 100 "$FP" "${eb[@]}" --out "$OUT/es_${g/:/}_$r.json" ||
        echo "$g: exit $?"
    done
    log "round $r: small row cells, base / tuned / block"
    local rb=(bench --backend cuda --op "$RS_OPS" --variants fused --shapes "$RS_SHAPES" --rep-ms 10 --quiet)
    timeout 60 "$BIN/fuseport-base" "${rb[@]}" --out "$OUT/rs_base$r.json" || echo "base: exit $?"
    timeout 60 "$FP" "${rb[@]}" --out "$OUT/rs_new$r.json" || echo "new: exit $?"
    FUSEPORT_CUDA_ROW_BUILDS=block timeout 60 "$FP" "${rb[@]}" --out "$OUT/rs_block$r.json" ||
      echo "block: exit $?"
  done
  compile_cells "$ES_OPS,$RS_OPS" "$ES_SHAPES,$RS_SHAPES"
}

# Whether cold instruction fetch explains the small cells: ncu's warp stall
# reasons (no_instruction: waiting for the instruction cache) on this build,
# every .gpu/bin/fuseport-* and torch.compile, then those builds timed on
# small elementwise cells, alternating (IC_ROUNDS), and compile.
IC_SHAPES=${IC_SHAPES:-128x128,256x256,512x512,128x2048,1024x1024,512x4096,2048x2048,4096x4096}
IC_ROUNDS=${IC_ROUNDS:-3}
stage_icache() {
  local m=$NCU_METRICS r known
  known=$(ncu --query-metrics --chip gh100 2>/dev/null) # only the stall metrics this ncu has
  for r in no_instruction long_scoreboard wait barrier branch_resolving; do
    grep -q "smsp__average_warps_issue_stalled_${r}_per_issue_active" <<<"$known" &&
      m=$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
  done
  echo "ncu metrics: $m"
  local nshapes=128x128,512x512,2048x2048 names bins i
  collect_builds
  for i in "${!bins[@]}"; do
    timeout 100 ncu --clock-control none --csv --metrics "$m" -k regex:_fused "${bins[$i]}" check \
      --backend cuda --op "$ES_OPS,softmax,layernorm" --variant fused --shapes $nshapes,128x2048 \
      --param training=false --param layout=contiguous --seed 1 --quiet >"$OUT/icn_${names[$i]}.csv" 2>&1
    echo "ncu ${names[$i]}: exit $?"
  done
  PYTHONUNBUFFERED=1 timeout 150 ncu --clock-control none --csv --metrics "$m" --profile-from-start off \
    -k regex:triton python3 bench/probes/ncu_torch.py --ops "$ES_OPS" --shapes $nshapes \
    >"$OUT/icn_torch.csv" 2>&1
  echo "ncu torch: exit $?"
  alternate "$IC_ROUNDS" es_ bench --backend cuda --op "$ES_OPS" --variants fused --shapes "$IC_SHAPES" \
    --rep-ms 10 --quiet
  compile_cells "$ES_OPS" "$IC_SHAPES"
}

# The lean ELEM builds (FUSEPORT_CUDA_ELEM_BUILDS): tests, checks of every
# parameter and layout of the elementwise ops and memcheck with them on,
# ncu against the registered builds, then the elementwise cells under
# registered / lean / lean with the grids of LEAN_GRIDS, alternating
# (LEAN_ROUNDS), and compile on the same cells.
LEAN_GRIDS=${LEAN_GRIDS-items:2 items:4} # empty: none
LEAN_ROUNDS=${LEAN_ROUNDS:-2}
LEAN_SHAPES=${LEAN_SHAPES:-128x128,256x256,512x512,128x2048,1024x1024,256x4096,512x4096,2048x2048,4096x2048,65536x128,128x65536,4096x4096,8192x4096}
stage_lean() {
  log "cmocka tests on cuda (lean builds on)"
  for t in test_backend test_ops; do
    timeout 150 "$BIN/$t" cuda >"$OUT/$t-lean.log" 2>&1
    echo "$t cuda: exit $? ($(grep -c '\[       OK \]' "$OUT/$t-lean.log") ok," \
      "$(grep -c '\[  FAILED  \]' "$OUT/$t-lean.log") failed lines)"
  done
  log "fuseport check --backend cuda, the elementwise ops, lean and registered"
  "$FP" check --backend cuda --op "$ES_OPS" --quiet | tail -2
  "$FP" check --backend cuda --op "$ES_OPS" --quiet --shapes 1x4,3x8,5x1000,1x65540,65540x4,1000x1000 |
    tail -1
  FUSEPORT_CUDA_ELEM_BUILDS=registered "$FP" check --backend cuda --op "$ES_OPS" --quiet | tail -1
  log "memcheck, the elementwise ops"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$FP" check --backend cuda \
    --op "$ES_OPS" --quiet --shapes 1x4,3x8,3x1000,7x65537,33x4096,1000x4 >"$OUT/memcheck-lean.log" 2>&1
  echo "memcheck exit $?"; tail -2 "$OUT/memcheck-lean.log"
  local m=$NCU_METRICS,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio b
  for b in registered lean; do
    FUSEPORT_CUDA_ELEM_BUILDS=$b timeout 60 ncu --clock-control none --csv --metrics "$m" \
      -k regex:_fused "$FP" check --backend cuda --op "$ES_OPS" --variant fused \
      --shapes 128x128,512x512,1024x1024,2048x2048 --param training=false \
      --param layout=contiguous --seed 1 --quiet >"$OUT/ncu_$b.csv" 2>&1
    echo "ncu $b: exit $?"
  done
  local r g eb=(bench --backend cuda --op "$ES_OPS" --variants fused --shapes "$LEAN_SHAPES" --rep-ms 10 --quiet)
  for r in $(seq 1 "$LEAN_ROUNDS"); do
    log "round $r: registered / lean / lean with $LEAN_GRIDS"
    FUSEPORT_CUDA_ELEM_BUILDS=registered timeout 100 "$FP" "${eb[@]}" --out "$OUT/es_reg$r.json" ||
      echo "registered: exit $?"
    timeout 100 "$FP" "${eb[@]}" --out "$OUT/es_lean$r.json" || echo "lean: exit $?"
    for g in $LEAN_GRIDS; do
      FUSEPORT_CUDA_ELEM_GRID=$g timeout 100 "$FP" "${eb[@]}" --out "$OUT/es_lean${g/:/}_$r.json" ||
        echo "lean $g: exit $?"
    done
  done
  compile_cells "$ES_OPS" "$LEAN_SHAPES"
}

stage_bench-cuda() { sweep cuda cuda.json; }
stage_bench-opencl() { sweep opencl opencl.json --platform NVIDIA; }

stage_torch() {
  local budget=$(($(left) - 10))
  log "PyTorch eager and torch.compile for at most $budget s"
  PYTHONUNBUFFERED=1 timeout -s INT -k 20 "$budget" python3 bench/torch_bench.py \
    --out "$OUT/torch.json" ${TORCH_ARGS:-} >"$OUT/torch.log" 2>&1
  echo "torch exit $?"; tail -15 "$OUT/torch.log"
}

for stage in "$@"; do
  "stage_$stage"
done
# The device tool brings back at most 8 files from $OUT: one archive.
(cd "$OUT" && files=$(ls | grep -v '^session\.tgz$') && [ -n "$files" ] &&
  tar czf session.tgz --remove-files $files)
log "done (results in session.tgz)"
