#!/usr/bin/env bash
# fuseport's OpenCL kernels under Oclgrind, the OpenCL simulator, as
# compute-sanitizer runs the CUDA ones: `fuseport check` of every op family
# on small odd shapes with data-race, uninitialised-value and API checking.
# Fails on any failed check and on any report of Oclgrind's.
#
#   tests/oclgrind.sh [BUILD_DIR]     (make test-oclgrind; JOBS runs in parallel)
#
# How Oclgrind 21.10 (Debian 12's) is run, and why:
#   --build-options -O0  Its --uninitialized check crashes on a shufflevector
#       with undefined lanes (the mask is compared with Value::UndefValueVal,
#       not -1; fixed upstream after 21.10), which LLVM's optimiser makes of
#       every horizontal reduction, and its own scalarising of stores of
#       vectors built from scalars (Program::removeLValueLoads) stores the
#       undefined base vector first, each store reported as an uninitialised
#       write. Unoptimised, neither happens, and every report points at the
#       source as written. -DFP_NO_FORCE_INLINE (kernels/cl/common.cl): at -O0
#       clang's always-inliner leaves llvm.experimental.noalias.scope.decl
#       calls, which 21.10 cannot run.
#   --log FILE  Reports go to a file per run, so that any line there fails
#       the run, whatever it says.
#   The backend itself works around what Oclgrind breaks on the host side
#   (fills, copies and partial writes through kernels, released buffers kept:
#   backend/opencl/opencl_oclgrind.h), and plans each row kernel within the
#   32 KiB of local memory the simulator reports (opencl_rows.c).
# The vendor variants (CLBlast's GEMM, and the unfused variants of the GEMM,
# convolution, attention and dw_from_packed ops built on it) are not ours and
# are left out.
set -u

build=${1:-build}
fuseport=$build/fuseport
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
if ! command -v oclgrind >/dev/null; then
  echo "oclgrind.sh: oclgrind not found (Debian: apt-get install oclgrind, or make deps)"
  exit 1
fi
if [ ! -x "$fuseport" ]; then
  echo "oclgrind.sh: $fuseport not built"
  exit 1
fi

# One run per line: environment (or -), then `fuseport check` arguments.
# Row ops: the cached paths on 1x1..3x130, every parameter combination;
# teams of 4 (FUSEPORT_OPENCL_ROWS_MAX_GROUP) stream short rows, misaligned;
# one long row reaches the _stream_back kernels, and the host's geometry the
# generic kernels.
cases=$(
  cat <<'EOF'
- --op pointwise_chain,bias_gelu,softmax,hreduce_pointwise,hreduce_reduce --shapes 1x1,3x5,2x33,3x130
- --op double_softmax,softmax_backward,layernorm,norm_chain --shapes 1x1,3x5,2x33,3x130
- --op bias_dropout_add --shapes 1x1,3x5,2x33
FUSEPORT_OPENCL_ROWS_MAX_GROUP=4 --op softmax,double_softmax,softmax_backward,layernorm,norm_chain --variant fused --shapes 3x77
FUSEPORT_OPENCL_HOST_GEOMETRY=1 --op softmax,double_softmax,softmax_backward,layernorm,norm_chain,hreduce_reduce --variant fused --shapes 2x33
- --op softmax,layernorm --variant fused --shapes 1x32771
- --op matmul_add,matmul_add_relu --variant fused --shapes 17x9x33
- --op matmul_relu,matmul_split_act,linear_geglu --variant fused --shapes 3x5x7
- --op matmul_matmul --variant fused --shapes 3x5x7x9
- --op quant_pack,dequant_unpack --shapes 5x300
- --op relu_pack,relu_unpack_backward --shapes 3x5,2x33
- --op dw_from_packed --variant fused --shapes 256x3x5 --param bits=2
FUSEPORT_OPENCL_DW_SPLIT=3 --op dw_from_packed --variant fused --shapes 300x7x9 --param bits=4 --param dtype=f32
- --op conv_add,conv_relu,conv_bn --variant fused --shapes 1x3x5x5x4
- --op attention --variant fused,memeff --shapes 1x1x3x8,1x2x5x7x8
EOF
)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)

run_case() { # index, environment, arguments...
  local i=$1 env=$2
  shift 2
  local -a vars=()
  [ "$env" != - ] && vars=("$env")
  env "${vars[@]}" oclgrind --data-races --uninitialized --check-api \
    --build-options "-O0 -DFP_NO_FORCE_INLINE" --log "$out/$i.log" \
    "$fuseport" check --backend opencl --platform Oclgrind --quiet "$@" >"$out/$i.out" 2>&1
  echo $? >"$out/$i.rc"
}

n=0
while read -r env args; do
  [ -z "$env" ] && continue
  # shellcheck disable=SC2086 # the arguments are words
  run_case "$n" "$env" $args &
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n
  done
done <<<"$cases"
wait

failed=0
i=0
while read -r env args; do
  [ -z "$env" ] && continue
  rc=$(cat "$out/$i.rc" 2>/dev/null || echo "?")
  if [ "$rc" != 0 ] || [ -s "$out/$i.log" ]; then
    failed=$((failed + 1))
    echo "FAIL (exit $rc$([ -s "$out/$i.log" ] && echo ", Oclgrind reports")): $env fuseport check $args"
    tail -n 20 "$out/$i.out"
    head -n 40 "$out/$i.log"
  else
    echo "ok   $(tail -n 1 "$out/$i.out" | sed 's/ (backend.*//'): $env $args"
  fi
  i=$((i + 1))
done <<<"$cases"

echo "oclgrind.sh: $n runs, $failed failed, $(($(date +%s) - start)) s"
[ "$failed" = 0 ]
