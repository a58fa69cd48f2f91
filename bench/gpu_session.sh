#!/usr/bin/env bash
# fuseport on a GPU machine: tests, checks, sanitizers, the record's sweeps
# (docs/PERF.md) and PyTorch's, and the matmul family's. From the repo root:
#
#   bash bench/gpu_session.sh STAGE...
#
#   tests         test_backend and test_ops on cuda and NVIDIA OpenCL (tests.log)
#   check         fuseport check, every op and variant, on cuda and NVIDIA OpenCL
#   sanitize      compute-sanitizer memcheck and racecheck over fuseport check
#                 of the ten memory-bound ops on small shapes (memcheck.log,
#                 racecheck.log)
#   bench-cuda    the record's sweep: the ten ops on the seed grid (cuda.json)
#   bench-opencl  the same on NVIDIA OpenCL (opencl.json)
#   torch         bench/torch_bench.py on the same ops and grid: PyTorch eager
#                 and torch.compile (torch.json, torch.log)
#   check-gemm    fuseport check of the matmul family on cuda and NVIDIA OpenCL
#   sanitize-gemm compute-sanitizer memcheck and racecheck over fuseport check
#                 of the matmul family (fused) on small odd shapes
#   bench-gemm    the matmul family on cuda, seed shapes, f16 and bf16
#                 (gemm-cuda.json)
#   bench-gemm-sm80    matmul_relu with the sm_80 main loop forced
#                 (FUSEPORT_CUDA_GEMM_PATH=sm80) beside cuBLASLt (gemm-cuda-sm80.json)
#   bench-gemm-opencl  matmul_relu and matmul_add_relu in f32 on NVIDIA OpenCL:
#                 the OpenCL core beside CLBlast (gemm-opencl.json)
#   check-compress  fuseport check of the compression family on cuda (both GEMM
#                 paths for dw_from_packed) and NVIDIA OpenCL
#   sanitize-compress  compute-sanitizer memcheck and racecheck over it
#   bench-compress  the compression family on cuda, seed shapes, every bits,
#                 bf16 dW (compress-cuda.json)
#   torch-compress  bench/torch_compress.py: the notebook's PyTorch path,
#                 eager, compile and the GEMM alone (compress-torch.json)
#   check-conv    fuseport check of the conv family on cuda (and its SIMT path
#                 forced) and NVIDIA OpenCL, odd shapes and ResNet layers
#   sanitize-conv compute-sanitizer memcheck and racecheck over it
#   bench-conv    the conv family on cuda: ResNet-50's layers at batch 8 and 32,
#                 f16 nhwc and f32 (conv-cuda.json)
#   torch-conv    bench/torch_conv.py: eager, compile and cuDNN's convolution
#                 alone on the same layers (conv-torch.json)
#   check-attention  fuseport check of attention on cuda and NVIDIA OpenCL: the
#                 odd shapes, forced key splits, and long sequences (sampled rows)
#   sanitize-attention  compute-sanitizer memcheck and racecheck over it
#   bench-attention  attention on cuda: ATTN_SHAPES (default: the quick default:
#                 the goal's shapes and decoding), causal and not, f16
#                 (ATTN_DTYPES), every variant (attention-cuda.json)
#   torch-attention  bench/torch_attention.py: eager, SDPA and each of its
#                 backends on ATTN_SHAPES (attention-torch.json); TORCH_ATTN_ARGS
#   torch-gemm    torch_bench.py on the matmul family: eager, compile,
#                 max-autotune and the GEMMs alone (gemm-torch.json,
#                 gemm-torch.log); GEMM_TORCH_OPS, GEMM_TORCH_SHAPES and
#                 GEMM_TORCH_DTYPES narrow it (max-autotune searches each
#                 shape: the whole seed list takes more than one call)
#
# The bench-* sweeps stop cleanly before the deadline and resume a partial
# file: the one in $OUT, else the one in RESUME_DIR (an earlier call's).
# Environment: OUT (results, default /tmp/fp-out), DEADLINE (seconds this call
# may take, default 570), RESERVE (seconds a sweep leaves for the stages after
# it, default 15), RESUME_DIR, BIN (default .gpu/bin, which bench/gpu_prepare.sh
# fills; if its fuseport does not run here, this tree is built for CUDA_ARCH,
# default 90), SWEEP_OPS (the ops of bench-cuda/opencl and torch), BENCH_ARGS
# (more options of every sweep), TORCH_ARGS (more options of torch_bench.py),
# PACK (1: pack $OUT into session.tgz at the end, since the device tool brings
# back at most 8 files; 0: leave the files). .gpu/gpu-env.sh, where present
# (gpu_prepare.sh), registers NVIDIA's OpenCL and unpacks the carried .debs.
set -u
OUT=${OUT:-/tmp/fp-out}
DEADLINE=${DEADLINE:-570}
RESERVE=${RESERVE:-15}
RESUME_DIR=${RESUME_DIR:-}
PACK=${PACK:-1}
MEM_OPS=pointwise_chain,bias_gelu,bias_dropout_add,softmax,double_softmax,softmax_backward,layernorm,norm_chain,hreduce_pointwise,hreduce_reduce
GEMM_OPS=matmul_add,matmul_relu,matmul_add_relu,matmul_matmul,matmul_split_act,linear_geglu
PACK_OPS=quant_pack,dequant_unpack,relu_pack,relu_unpack_backward
COMPRESS_OPS=$PACK_OPS,dw_from_packed
CONV_OPS=conv_add,conv_relu,conv_bn
SWEEP_OPS=${SWEEP_OPS:-$MEM_OPS}
mkdir -p "$OUT"
[ -f .gpu/gpu-env.sh ] && . .gpu/gpu-env.sh
BIN=${BIN:-.gpu/bin}
# the binaries' libfuseport.so sits beside them (gpu_prepare.sh)
export LD_LIBRARY_PATH=$PWD/$BIN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# cuDNN (the conv family's library): the system's, else the one PyTorch ships
if ! ldconfig -p | grep -q 'libcudnn\.so\.9' && [ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]; then
  CUDNN_LIB=$(python3 -c 'import os, nvidia.cudnn as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$CUDNN_LIB" ] && export LD_LIBRARY_PATH=$CUDNN_LIB:$LD_LIBRARY_PATH
fi
FP=$BIN/fuseport
log() { echo "== [$SECONDS s] $*"; }
left() { echo $((DEADLINE - SECONDS)); }

if ! "$FP" list >/dev/null 2>&1; then
  log "no fuseport in $BIN runs here; building this tree for sm_${CUDA_ARCH:-90}"
  cmake -S . -B /tmp/fp-build -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build /tmp/fp-build -j "$(nproc)" >/dev/null || { log "build failed"; exit 1; }
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

# check_both ARGS...: fuseport check ARGS on cuda, then on NVIDIA OpenCL.
check_both() {
  log "fuseport check --backend cuda $*"
  "$FP" check --backend cuda --quiet "$@" | tail -3
  log "fuseport check --backend opencl --platform NVIDIA $*"
  "$FP" check --backend opencl --platform NVIDIA --quiet "$@" | tail -3
}

stage_check() { check_both; }
stage_check-gemm() { check_both --op "$GEMM_OPS"; }

stage_sanitize() {
  log "compute-sanitizer memcheck: fuseport check --backend cuda (small shapes)"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --op "$MEM_OPS" --shapes 3x1000,7x65537,33x4097,70x3001,530x1030,1000x3,40x32769,40x65537 \
    >"$OUT/memcheck.log" 2>&1
  echo "memcheck exit $?"; tail -4 "$OUT/memcheck.log"
  log "compute-sanitizer racecheck: row reductions and the transposed tile"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$FP" check --backend cuda \
    --quiet --shapes 3x1000,33x4097,70x3001,40x32769,40x65537 \
    --op softmax,double_softmax,softmax_backward,layernorm,norm_chain,hreduce_pointwise,hreduce_reduce,bias_dropout_add \
    >"$OUT/racecheck.log" 2>&1
  echo "racecheck exit $?"; tail -4 "$OUT/racecheck.log"
}

stage_sanitize-gemm() {
  local shapes=1x1x1,7x33x100,33x7x1000,100x100x100,70x129x257,16x4097x33,130x64x4097
  shapes=$shapes,300x260x1000,129x257x2048,1x1x1x1,7x33x100x17,70x64x129x96,33x300x65x7
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool: fuseport check --backend cuda, the matmul family, fused"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$FP" check --backend cuda \
      --quiet --op "$GEMM_OPS" --variant fused --shapes $shapes >"$OUT/gemm-$tool.log" 2>&1
    echo "$tool exit $?"; tail -4 "$OUT/gemm-$tool.log"
  done
}

# sweep FILE ARGS...: fuseport bench ARGS --out $OUT/FILE until RESERVE seconds
# before the deadline (SIGINT: the file stays valid), or --resume of the
# partial FILE in $OUT or in RESUME_DIR.
sweep() {
  local file=$1
  shift
  local budget=$(($(left) - RESERVE))
  [ "$budget" -gt 30 ] || { log "no time left for $file"; return; }
  if [ ! -f "$OUT/$file" ] && [ -n "$RESUME_DIR" ] && [ -f "$RESUME_DIR/$file" ]; then
    cp "$RESUME_DIR/$file" "$OUT/$file"
  fi
  if [ -f "$OUT/$file" ]; then
    log "resuming $file for at most $budget s"
    timeout -s INT -k 20 "$budget" "$FP" bench --resume "$OUT/$file" --quiet
  else
    log "$file: fuseport bench $* for at most $budget s"
    timeout -s INT -k 20 "$budget" "$FP" bench "$@" ${BENCH_ARGS:-} --out "$OUT/$file" --quiet
  fi
  echo "bench exit $?; cells: $(grep -c '"op":' "$OUT/$file")"
}

stage_bench-cuda() { sweep cuda.json --backend cuda --op "$SWEEP_OPS" --shapes seed --rep-ms 20; }
stage_bench-opencl() {
  sweep opencl.json --backend opencl --platform NVIDIA --op "$SWEEP_OPS" --shapes seed --rep-ms 20
}
stage_bench-gemm() {
  sweep gemm-cuda.json --backend cuda --op "$GEMM_OPS" --shapes seed --param dtype=f16,bf16 \
    --sample-elems 262144
}
stage_bench-gemm-sm80() {
  FUSEPORT_CUDA_GEMM_PATH=sm80 sweep gemm-cuda-sm80.json --backend cuda --op matmul_relu \
    --variants fused,vendor --param dtype=f16,bf16 --sample-elems 262144 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,2048x11008x4096,8192x1024x4096
}
stage_bench-gemm-opencl() {
  sweep gemm-opencl.json --backend opencl --platform NVIDIA --op matmul_relu,matmul_add_relu \
    --param dtype=f32 --sample-elems 262144 \
    --shapes 1024x1024x1024,2048x2048x2048,4096x4096x4096,4097x4097x4097,8192x1024x4096
}

# torch_run NAME ARGS...: bench/torch_bench.py ARGS until 10 s before the deadline.
torch_run() {
  local name=$1
  shift
  local budget=$(($(left) - 10))
  log "torch_bench.py $* for at most $budget s"
  PYTHONUNBUFFERED=1 timeout -s INT -k 20 "$budget" python3 bench/torch_bench.py "$@" \
    --out "$OUT/$name.json" ${TORCH_ARGS:-} >"$OUT/$name.log" 2>&1
  echo "torch exit $?"; tail -15 "$OUT/$name.log"
}

stage_torch() { torch_run torch --ops "$SWEEP_OPS" --shapes seed; }
stage_torch-gemm() {
  torch_run gemm-torch --ops "${GEMM_TORCH_OPS:-matmul}" --shapes "${GEMM_TORCH_SHAPES:-seed}" \
    --param dtype="${GEMM_TORCH_DTYPES:-f16,bf16}" --modes eager,compile,autotune,gemm --mm-check swept
}

stage_check-compress() {
  check_both --op "$COMPRESS_OPS"
  log "dw_from_packed with the SIMT path forced"
  FUSEPORT_CUDA_GEMM_PATH=simt "$FP" check --backend cuda --quiet --op dw_from_packed | tail -2
  log "dw_from_packed on the seed's shapes (sampled rows)"
  "$FP" check --backend cuda --quiet --op dw_from_packed --param dtype=bf16 \
    --shapes 8192x768x768,100864x768x768,8191x768x768,8192x1024x1024 --sample-elems 4000000 | tail -2
}
stage_sanitize-compress() {
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool: the compression family"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$FP" check --backend cuda \
      --quiet --op "$COMPRESS_OPS" >"$OUT/compress-$tool.log" 2>&1
    echo "$tool exit $?"; tail -3 "$OUT/compress-$tool.log"
  done
}
stage_bench-compress() {
  sweep compress-cuda.json --backend cuda --op "$COMPRESS_OPS" --shapes seed \
    --param bits=1,2,4,8 --param dtype=bf16 --sample-elems 262144
}
stage_torch-compress() {
  local budget=$(($(left) - 10))
  log "torch_compress.py for at most $budget s"
  PYTHONUNBUFFERED=1 timeout -s INT -k 20 "$budget" python3 bench/torch_compress.py \
    --out "$OUT/compress-torch.json" --bits 2 >"$OUT/compress-torch.log" 2>&1
  echo "torch exit $?"; tail -12 "$OUT/compress-torch.log"
}

stage_check-conv() {
  check_both --op "$CONV_OPS"
  log "the conv family with the SIMT path forced"
  FUSEPORT_CUDA_GEMM_PATH=simt "$FP" check --backend cuda --quiet --op "$CONV_OPS" | tail -2
  log "ResNet-50 layers, f16 nhwc (sampled rows)"
  "$FP" check --backend cuda --quiet --op "$CONV_OPS" --param layout=nhwc --param dtype=f16 \
    --shapes 32x64x56x56x64x3x1,8x3x224x224x64x7x2,32x1024x14x14x256x1x1,8x512x7x7x512x3x1 \
    --sample-elems 4000000 | tail -2
}
stage_sanitize-conv() {
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool: the conv family"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$FP" check --backend cuda \
      --quiet --op "$CONV_OPS" --variant fused >"$OUT/conv-$tool.log" 2>&1
    echo "$tool exit $?"; tail -3 "$OUT/conv-$tool.log"
  done
}
stage_bench-conv() {
  sweep conv-cuda.json --backend cuda --op "$CONV_OPS" --shapes "${CONV_SHAPES:-seed}" \
    --param layout=nhwc --param dtype="${CONV_DTYPES:-f16,f32}" --sample-elems 262144
}
stage_torch-conv() {
  local budget=$(($(left) - 10))
  log "torch_conv.py for at most $budget s"
  PYTHONUNBUFFERED=1 timeout -s INT -k 20 "$budget" python3 bench/torch_conv.py \
    --out "$OUT/conv-torch.json" ${TORCH_CONV_ARGS:-} >"$OUT/conv-torch.log" 2>&1
  echo "torch exit $?"; tail -12 "$OUT/conv-torch.log"
}

stage_check-attention() {
  check_both --op attention
  log "attention with forced key splits (flash-decoding) and small memeff chunks"
  "$FP" check --backend cuda --quiet --op attention --variant fused,memeff --param splits=5 \
    --param chunk=64 --shapes 2x3x17x64,1x2x1x700x128,1x1x33x17x256,2x2x200x300x80 | tail -2
  log "long sequences and decoding, every type (sampled rows)"
  "$FP" check --backend cuda --quiet --op attention \
    --shapes 2x16x2048x128,2x32x2048x64,1x8x4097x4097x128,8x32x1x8192x128 \
    --sample-elems 200000 | tail -2
}
stage_sanitize-attention() {
  for tool in memcheck racecheck; do
    log "compute-sanitizer $tool: attention"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$FP" check --backend cuda \
      --quiet --op attention --variant fused,memeff --param chunk=64 \
      --shapes 2x3x17x64,1x2x130x130x128,1x1x33x17x256,2x2x1x300x80 >"$OUT/attention-$tool.log" 2>&1
    echo "$tool exit $?"; tail -3 "$OUT/attention-$tool.log"
  done
}
stage_bench-attention() {
  sweep attention-cuda.json --backend cuda --op attention ${ATTN_SHAPES:+--shapes "$ATTN_SHAPES"} \
    --param causal=false,true --param dtype="${ATTN_DTYPES:-f16}" --sample-elems 262144
}
stage_torch-attention() {
  local budget=$(($(left) - 10))
  log "torch_attention.py for at most $budget s"
  PYTHONUNBUFFERED=1 timeout -s INT -k 20 "$budget" python3 bench/torch_attention.py \
    --out "$OUT/attention-torch.json" --shapes "${ATTN_SHAPES:-default}" --causal false,true \
    --dtypes "${ATTN_DTYPES:-f16}" --time-limit $((budget - 20)) ${TORCH_ATTN_ARGS:-} \
    >"$OUT/attention-torch.log" 2>&1
  echo "torch exit $?"; tail -12 "$OUT/attention-torch.log"
}

for stage in "$@"; do
  declare -F "stage_$stage" >/dev/null || { log "no stage '$stage'"; exit 2; }
done
for stage in "$@"; do
  "stage_$stage"
done
if [ "$PACK" = 1 ]; then
  (cd "$OUT" && files=$(ls | grep -v '^session\.tgz$') && [ -n "$files" ] &&
    tar czf session.tgz --remove-files $files)
  log "done (results in $OUT/session.tgz)"
else
  log "done (results in $OUT)"
fi
