/* fuseport bench: sweeps ops x variants x shapes on one backend and device,
 * writes the cells (JSON/CSV, atomically after every group) and prints the
 * seed study's tables. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_bench.h"

static const char bench_usage[] =
    "usage: fuseport bench [--backend cpu|opencl|cuda] [--device N] [--platform NAME]\n"
    "                      [--op NAME[,NAME...]|all] [--variants fused,unfused,vendor]\n"
    "                      [--shapes seed|SHAPE[,SHAPE...] | --dim0 LIST --dim1 LIST]\n"
    "                      [--param NAME=VALUE[,VALUE...]]... [--reps N | --rep-ms MS]\n"
    "                      [--warmup-ms MS] [--seed N] [--sample-elems N] [--flush-mib N]\n"
    "                      [--flush write|read]\n"
    "                      [--format table|csv|json] [--out FILE] [--resume FILE]\n"
    "                      [--retry-errors] [--shard I/N] [--quiet]\n"
    "\n"
    "Benchmarks each selected op and variant over its shapes on one device. Per\n"
    "(op, shape) the inputs are filled once with seeded random values and the\n"
    "float64 reference is computed once (on sampled rows for large cells); then\n"
    "each variant is checked against it and timed: warm-up runs, then repetitions\n"
    "each timed with device events (a monotonic clock on the cpu backend), the\n"
    "last-level cache flushed before each one by writing a buffer of at least\n"
    "twice its size (or reading it: --flush read). Reported per cell: median/min/\n"
    "max time, kernels launched and library calls (cuBLAS, CLBlast, the CPU GEMM)\n"
    "per call, both counted by the backend layer and checked against the cost\n"
    "model, intermediate footprint and peak device bytes, bytes and FLOPs of the\n"
    "cost model, GB/s and its fraction of the device's copy bandwidth (bw_frac),\n"
    "GFLOP/s, the roofline fraction (roof_frac, below), kernel build and library\n"
    "preparation time, and the reference errors. A cell that does not fit is\n"
    "recorded as oom, a wrong result as fail (still timed), a variant the backend\n"
    "cannot run (vendor off CUDA, a type its library lacks) as unsupported (n/a\n"
    "in the tables; not a failure), any other failure as error; the sweep goes on.\n"
    "\n"
    "Shapes: a shape has one dimension per grid dimension of the op: MxN (dim0 x\n"
    "dim1: rows x row length) for the row ops, MxNxK for the GEMMs, MxNxKxP for\n"
    "matmul_matmul, NxCxHxWxK[xR[xstride]] for the convolutions, whose omitted\n"
    "trailing dims come from --param (e.g. --shapes 32x64x56x56x64 --param R=3,1),\n"
    "BxHxSxD or BxHxSxSKxD for attention (batch, heads, query length, key\n"
    "length, head dim; e.g. 4x16x4096x128, or decoding 8x32x1x8192x128)\n"
    "(fuseport list). Each op runs the given shapes of its rank; an op with none\n"
    "is left out (a note says so; none at all is an error).\n"
    "\n"
    "Roofline: roof_frac = max(bytes / copy bandwidth, flops / peak) / median,\n"
    "the peak being the FLOP/s of the cell's compute type (f32; f16 or bf16 for\n"
    "the GEMMs' dtype=). The peaks are measured once per run for the types the\n"
    "sweep uses with the backend's library GEMM (8192^3 on a GPU, 256^3 on the\n"
    "cpu backend) or stated with FUSEPORT_PEAK_TFLOPS=f16:989.4,bf16:989.4,\n"
    "f32:66.9, which wins; they are recorded in meta.peak_tflops (--resume keeps\n"
    "the file's; merge, shard 0's). Where neither gives a peak (no library GEMM\n"
    "of that type) it is null and roof_frac uses the bandwidth term alone. The\n"
    "tables' headline is the bandwidth fraction for memory-bound ops and TFLOP/s\n"
    "with the roofline fraction for compute-bound ones (ops with a compute type:\n"
    "the matmul family).\n"
    "\n"
    "options:\n"
    "  --backend B        cpu, opencl or cuda (default: the best present,\n"
    "                     cuda > opencl > cpu; printed)\n"
    "  --device N         device index within the backend (default: the first)\n"
    "  --platform NAME    OpenCL platform name substring, e.g. NVIDIA or Portable\n"
    "  --op LIST          comma-separated op names, or all (default: all)\n"
    "  --variants LIST    fused, unfused, vendor, memeff (default: every variant of the\n"
    "                     selected ops; --variant too)\n"
    "  --shapes S         seed: each op's seed list (the row ops: dim0 and dim1 in\n"
    "                     {128, 256, ..., 65536}, 100 shapes; the GEMMs: squares,\n"
    "                     LLM and decode shapes, odd sizes), their union recorded;\n"
    "                     or SHAPE[,SHAPE...], e.g. 4096x4096,4096x4096x4096\n"
    "  --dim0 LIST        with --dim1: the grid of every dim0 x dim1 pair (2-D)\n"
    "  --dim1 LIST        (default: each op's own quick list: the row ops\n"
    "                     256,1024 x 256,2048, the GEMMs 128^3 and 512^3)\n"
    "  --param N=V[,V..]  set an op parameter (ops that have it); a list sweeps the\n"
    "                     values, e.g. --param training=false,true or\n"
    "                     --param dtype=f16,bf16\n"
    "  --reps N           exactly N timed repetitions per cell\n"
    "  --rep-ms MS        else repeat for about MS ms of device time, flushes\n"
    "                     included, at least 5 and at most 10000 times (default 40)\n"
    "  --warmup-ms MS     untimed runs first, for about MS ms (default 10); on a\n"
    "                     GPU, a cell timed after 1 GiB or more was freed runs\n"
    "                     100 ms of flushes and itself before them (the driver's\n"
    "                     release of that memory slows kernels for tens of ms)\n"
    "  --seed N           input seed (default 20230814: runs are reproducible)\n"
    "  --sample-elems N   reference budget per cell: above N elements read and\n"
    "                     written, only first/middle/last rows are checked\n"
    "                     (default 1048576; 0 checks every row)\n"
    "  --flush-mib N      cache flush buffer in MiB (default: twice the last-level\n"
    "                     cache the device reports, at least 8 MiB; printed)\n"
    "  --flush MODE       write (default; as Triton's do_bench and PyTorch\n"
    "                     benchmarks do) or read: a write leaves the cache full\n"
    "                     of dirty lines, whose write-back the timed kernel\n"
    "                     shares, as after any kernel that produced its input;\n"
    "                     a read (a row-sum kernel over the buffer) leaves it\n"
    "                     clean, timing the kernel alone. On a GPU, a run\n"
    "                     the host takes longer to issue than one flush takes\n"
    "                     to run (a library's heuristics) gets more flushes\n"
    "                     ahead of it, so the host's time is not timed\n"
    "  --format F         table (default), csv or json; without --out, printed\n"
    "  --out FILE         write the cells to FILE, json (default; also for *.json)\n"
    "                     or csv (*.csv or --format csv), rewritten atomically\n"
    "                     after every (op, shape) so a cut-short run leaves a valid\n"
    "                     file; the table is still printed unless --quiet\n"
    "  --resume FILE      continue the JSON file of an interrupted run: its cells\n"
    "                     are kept, the missing ones run; options not given are\n"
    "                     taken from the file, those given must match it. A\n"
    "                     group that a killed run was inside (SIGKILL, as a\n"
    "                     scheduler preempts a job; a hang stopped by a\n"
    "                     timeout; a crash) is retried once, first; if a run\n"
    "                     dies inside it again, the next --resume records its\n"
    "                     cells as error\n"
    "  --retry-errors     with --resume: run the error cells, and such a group,\n"
    "                     again (not the unsupported ones)\n"
    "  --shard I/N        run only shard I of N (0 <= I < N): the (op, shape)\n"
    "                     groups with index % N == I; join the files with merge\n"
    "  --quiet            no table, no progress, no notes, no summary\n"
    "\n"
    "Tables: rank-2 ops get dim0 x dim1 grids (relative performance unfused/fused,\n"
    "the fused median, its bandwidth fraction); ops of rank 3 and more a list,\n"
    "one row per (shape, params): each variant's median (us), the ratios\n"
    "unfused/fused and vendor/fused (>1: fused wins), TFLOP/s and roofline\n"
    "fraction of fused. Marks: OOM, FAIL, ERR, n/a (unsupported), - (missing).\n"
    "\n"
    "CSV columns (--format csv), one row per cell, as in the JSON:\n"
    "  op, variant, backend, params, shape (MxNxK...), dim0, dim1 (rank-2 cells\n"
    "  only), status, median_us, min_us, max_us, reps, kernels, library_calls,\n"
    "  bytes, gbps, bw_frac, roof_frac, flops, gflops, footprint_bytes,\n"
    "  peak_bytes, compile_ms, max_abs_err, max_rel_err, rel_l2_err, ok,\n"
    "  message; an empty field is a null (not measured, or not applicable to the\n"
    "  cell's status).\n"
    "\n"
    "A progress line (cells done/total, elapsed, estimate) goes to stderr when it\n"
    "is a terminal. Ctrl-C (or SIGTERM) stops at the next repetition: the\n"
    "unfinished (op, shape) is dropped, the file holds every finished one and\n"
    "--resume completes it.\n"
    "\n"
    "The FUSEPORT_* environment variables, which pick kernel builds, grids and\n"
    "compiler options (FUSEPORT_CUDA_ROW_BUILDS, FUSEPORT_CUDA_ELEM_GRID,\n"
    "FUSEPORT_CUDA_ELEM_BUILDS, FUSEPORT_OPENCL_BUILD_OPTIONS, ...; see the\n"
    "README) or state the peaks (FUSEPORT_PEAK_TFLOPS), are recorded in the\n"
    "file's meta.environment; --resume needs the same ones.\n"
    "\n"
    "examples:\n"
    "  fuseport bench                                  # quick default run\n"
    "  fuseport bench --backend cuda --op all --shapes seed --out cuda.json\n"
    "  fuseport bench --resume cuda.json               # after an interruption\n"
    "  fuseport bench --backend opencl --op softmax,layernorm --dim0 1024,4096 \\\n"
    "      --dim1 128,65536 --reps 50 --format csv --out cl.csv\n"
    "  fuseport bench --backend cuda --op matmul_add,matmul_relu \\\n"
    "      --shapes 4096x4096x4096,8192x1024x4096 --param dtype=f16,bf16\n"
    "  fuseport bench --backend cuda --device $I --shapes seed --shard $I/4 \\\n"
    "      --out shard$I.json      # then: fuseport merge all.json shard*.json\n"
    "\n"
    "exit status: 0 every cell ok, oom or unsupported, 1 a cell failed or errored,\n"
    "the run was interrupted or could not run, 2 bad usage\n";

/* ---- parsing --------------------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void
usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuseport bench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see fuseport bench --help)\n");
  va_end(ap);
}

static bool parse_shard(const char *text, int *index, int *count) {
  if (fp_bench_parse_shard(text, index, count))
    return true;
  fprintf(stderr,
          "fuseport bench: --shard '%s' is not I/N with 0 <= I < N (example: --shard 0/4)\n", text);
  return false;
}

static bool parse_variants(const char *text, fp_bench_spec *s) {
  s->n_variants = 0;
  const char *p = text;
  while (true) {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof s->variants[0] || s->n_variants >= FP_MAX_VARIANTS) {
      fprintf(
          stderr,
          "fuseport bench: --variants '%s' is not a list of variants (example: fused,unfused)\n",
          text);
      return false;
    }
    snprintf(s->variants[s->n_variants++], sizeof s->variants[0], "%.*s", (int)n, p);
    if (p[n] == '\0')
      return true;
    p += n + 1;
  }
}

int fp_bench_parse_args(int argc, char **argv, fp_bench_cli *cli) {
  memset(cli, 0, sizeof *cli);
  cli->target.device = -1;
  fp_bench_spec *s = &cli->spec;
  fp_bench_spec_init(s);
  const char *op_list = "all", *format = NULL, *shapes = NULL;
  int64_t dim0[FP_BENCH_MAX_SHAPES], dim1[FP_BENCH_MAX_SHAPES];
  int n0 = 0, n1 = 0;
  bool have_reps = false, have_rep_ms = false;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    int t = fp_cli_target_option(&cli->target, argc, argv, &i);
    if (t < 0)
      return FP_EXIT_USAGE;
    if (t > 0)
      continue;
    const char *v = NULL;
    /* every option below except these takes a value */
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(bench_usage, stdout);
      return -1;
    }
    if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      cli->quiet = true;
      continue;
    }
    if (strcmp(a, "--retry-errors") == 0) {
      cli->retry_errors = true;
      continue;
    }
    bool known =
        strcmp(a, "--op") == 0 || strcmp(a, "--variants") == 0 || strcmp(a, "--variant") == 0 ||
        strcmp(a, "--shapes") == 0 || strcmp(a, "--dim0") == 0 || strcmp(a, "--dim1") == 0 ||
        strcmp(a, "--param") == 0 || strcmp(a, "--reps") == 0 || strcmp(a, "--rep-ms") == 0 ||
        strcmp(a, "--warmup-ms") == 0 || strcmp(a, "--seed") == 0 ||
        strcmp(a, "--sample-elems") == 0 || strcmp(a, "--flush-mib") == 0 ||
        strcmp(a, "--flush") == 0 || strcmp(a, "--format") == 0 || strcmp(a, "--out") == 0 ||
        strcmp(a, "-o") == 0 || strcmp(a, "--resume") == 0 || strcmp(a, "--shard") == 0;
    if (!known) {
      usage_error("unknown option '%s'", a);
      return FP_EXIT_USAGE;
    }
    if ((v = fp_cli_value(argc, argv, &i)) == NULL)
      return FP_EXIT_USAGE;
    if (strcmp(a, "--op") == 0) {
      op_list = v;
      cli->given |= FP_GIVEN_OPS;
    } else if (strcmp(a, "--variants") == 0 || strcmp(a, "--variant") == 0) {
      if (!parse_variants(v, s))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_VARIANTS;
    } else if (strcmp(a, "--shapes") == 0) {
      shapes = v;
      cli->given |= FP_GIVEN_SHAPES;
    } else if (strcmp(a, "--dim0") == 0) {
      if (!fp_cli_parse_dims("--dim0", v, dim0, FP_BENCH_MAX_SHAPES, &n0))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_SHAPES;
    } else if (strcmp(a, "--dim1") == 0) {
      if (!fp_cli_parse_dims("--dim1", v, dim1, FP_BENCH_MAX_SHAPES, &n1))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_SHAPES;
    } else if (strcmp(a, "--param") == 0) {
      const char *eq = strchr(v, '=');
      if (eq == NULL || eq == v || (size_t)(eq - v) >= sizeof s->params[0].name ||
          strlen(eq + 1) >= sizeof s->params[0].values) {
        usage_error("--param wants NAME=VALUE[,VALUE...], got '%s'", v);
        return FP_EXIT_USAGE;
      }
      if (s->n_params >= FP_BENCH_MAX_PARAMS) {
        usage_error("more than 16 --param options");
        return FP_EXIT_USAGE;
      }
      snprintf(s->params[s->n_params].name, sizeof s->params[0].name, "%.*s", (int)(eq - v), v);
      snprintf(s->params[s->n_params].values, sizeof s->params[0].values, "%s", eq + 1);
      s->n_params++;
      cli->given |= FP_GIVEN_PARAMS;
    } else if (strcmp(a, "--reps") == 0) {
      if (!fp_cli_parse_i64("--reps", v, 1, 1000000, &s->reps))
        return FP_EXIT_USAGE;
      have_reps = true;
      cli->given |= FP_GIVEN_REPS;
    } else if (strcmp(a, "--rep-ms") == 0) {
      if (!fp_cli_parse_f64("--rep-ms", v, 1e-3, 3.6e6, &s->rep_ms))
        return FP_EXIT_USAGE;
      have_rep_ms = true;
      cli->given |= FP_GIVEN_REPS;
    } else if (strcmp(a, "--warmup-ms") == 0) {
      if (!fp_cli_parse_f64("--warmup-ms", v, 0, 3.6e6, &s->warmup_ms))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_WARMUP;
    } else if (strcmp(a, "--seed") == 0) {
      int64_t seed;
      if (!fp_cli_parse_i64("--seed", v, 0, (int64_t)((1ull << 53) - 1), &seed))
        return FP_EXIT_USAGE;
      s->seed = (uint64_t)seed;
      cli->given |= FP_GIVEN_SEED;
    } else if (strcmp(a, "--sample-elems") == 0) {
      if (!fp_cli_parse_i64("--sample-elems", v, 0, INT64_MAX / 2, &s->sample_elems))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_SAMPLE;
    } else if (strcmp(a, "--flush-mib") == 0) {
      int64_t mib;
      if (!fp_cli_parse_i64("--flush-mib", v, 1, 1 << 20, &mib))
        return FP_EXIT_USAGE;
      s->flush_bytes = (uint64_t)mib << 20;
      cli->given |= FP_GIVEN_FLUSH;
    } else if (strcmp(a, "--flush") == 0) {
      if (strcmp(v, "read") != 0 && strcmp(v, "write") != 0) {
        usage_error("--flush must be write or read, not '%s'", v);
        return FP_EXIT_USAGE;
      }
      s->flush_read = strcmp(v, "read") == 0;
      cli->given |= FP_GIVEN_FLUSH_MODE;
    } else if (strcmp(a, "--format") == 0) {
      format = v;
    } else if (strcmp(a, "--out") == 0 || strcmp(a, "-o") == 0) {
      cli->out = v;
    } else if (strcmp(a, "--resume") == 0) {
      cli->resume = v;
    } else if (strcmp(a, "--shard") == 0) {
      if (!parse_shard(v, &s->shard_index, &s->shard_count))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_SHARD;
    }
  }
  if (have_reps && have_rep_ms) {
    usage_error("--reps and --rep-ms exclude each other");
    return FP_EXIT_USAGE;
  }
  if (have_rep_ms)
    s->reps = 0;
  if (!fp_cli_parse_ops(op_list, s->ops, FP_BENCH_MAX_OPS, &s->n_ops))
    return FP_EXIT_USAGE;
  /* shapes */
  if ((n0 > 0) != (n1 > 0)) {
    usage_error("%s needs %s as well", n0 > 0 ? "--dim0" : "--dim1", n0 > 0 ? "--dim1" : "--dim0");
    return FP_EXIT_USAGE;
  }
  if (shapes != NULL && n0 > 0) {
    usage_error("--shapes and --dim0/--dim1 exclude each other");
    return FP_EXIT_USAGE;
  }
  fp_status shapes_st = FP_OK;
  if (shapes != NULL && strcmp(shapes, "seed") == 0) {
    shapes_st = fp_bench_spec_seed_shapes(s);
  } else if (shapes != NULL) {
    if (!fp_cli_parse_shape_list("--shapes", shapes, s->shapes, FP_BENCH_MAX_SHAPES, &s->n_shapes))
      return FP_EXIT_USAGE;
  } else if (n0 > 0) {
    if (n0 * n1 > FP_BENCH_MAX_SHAPES) {
      usage_error("--dim0 x --dim1 makes more than %d shapes", FP_BENCH_MAX_SHAPES);
      return FP_EXIT_USAGE;
    }
    s->n_shapes = 0;
    for (int i = 0; i < n0; ++i)
      for (int j = 0; j < n1; ++j)
        s->shapes[s->n_shapes++] = fp_shape_2d(dim0[i], dim1[j]);
  } else {
    shapes_st = fp_bench_spec_default_shapes(s);
  }
  if (shapes_st != FP_OK) {
    usage_error("%s", fp_last_error());
    return FP_EXIT_USAGE;
  }
  /* an op runs the shapes of its rank; one with none is left out */
  char left_out[1024] = "";
  int kept = 0;
  for (int k = 0; k < s->n_ops; ++k) {
    if (fp_bench_op_shape_count(s, s->ops[k]) > 0) {
      s->ops[kept++] = s->ops[k];
      continue;
    }
    char pattern[64];
    fp_cli_shape_pattern(s->ops[k], pattern, sizeof pattern);
    size_t used = strlen(left_out);
    snprintf(left_out + used, sizeof left_out - used, "%s%s (%s)", used ? ", " : "",
             s->ops[k]->name, pattern);
  }
  if (kept == 0) {
    usage_error("no selected op takes shapes of the ranks given: %s", left_out);
    return FP_EXIT_USAGE;
  }
  s->n_ops = kept;
  if (left_out[0] != '\0' && !cli->quiet && !(cli->resume != NULL && !(cli->given & FP_GIVEN_OPS)))
    fprintf(stderr, "fuseport bench: note: left out, no shape of their rank: %s\n", left_out);
  if (!(cli->given & FP_GIVEN_VARIANTS))
    fp_bench_spec_all_variants(s); /* every variant of the ops that run */
  /* FUSEPORT_PEAK_TFLOPS, read by the run: refused here, before any device */
  const char *peaks = getenv("FUSEPORT_PEAK_TFLOPS");
  double stated[FP_DTYPE_COUNT];
  if (peaks != NULL && fp_bench_parse_peaks(peaks, stated) != FP_OK) {
    fprintf(stderr, "fuseport bench: %s\n", fp_last_error());
    return FP_EXIT_USAGE;
  }
  /* output */
  if (format != NULL) {
    if (strcmp(format, "table") == 0)
      cli->format = FP_FORMAT_TABLE;
    else if (strcmp(format, "csv") == 0)
      cli->format = FP_FORMAT_CSV;
    else if (strcmp(format, "json") == 0)
      cli->format = FP_FORMAT_JSON;
    else {
      usage_error("--format '%s' is not table, csv or json", format);
      return FP_EXIT_USAGE;
    }
  }
  if (cli->resume != NULL) {
    if (cli->out != NULL && strcmp(cli->out, cli->resume) != 0) {
      usage_error("--resume %s continues that file; --out %s names another", cli->resume, cli->out);
      return FP_EXIT_USAGE;
    }
    if (format != NULL && cli->format == FP_FORMAT_CSV) {
      usage_error("--resume needs a JSON results file, not --format csv");
      return FP_EXIT_USAGE;
    }
    cli->out = cli->resume;
    cli->format = FP_FORMAT_JSON;
  } else if (cli->retry_errors) {
    usage_error("--retry-errors goes with --resume FILE");
    return FP_EXIT_USAGE;
  } else if (cli->out != NULL) {
    if (format != NULL && cli->format == FP_FORMAT_TABLE) {
      usage_error("--out writes json or csv; the table always goes to stdout");
      return FP_EXIT_USAGE;
    }
    if (format == NULL) {
      size_t n = strlen(cli->out);
      cli->format =
          n >= 4 && strcmp(cli->out + n - 4, ".csv") == 0 ? FP_FORMAT_CSV : FP_FORMAT_JSON;
    }
  }
  if (cli->resume == NULL && fp_bench_spec_validate(s) != FP_OK) {
    fprintf(stderr, "fuseport bench: %s (see fuseport bench --help)\n", fp_last_error());
    return FP_EXIT_USAGE;
  }
  return FP_EXIT_OK;
}

/* ---- the command ---------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
  if (stop_flag) { /* a second one: stop now (the file on disk is complete) */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  stop_flag = 1;
  static const char msg[] = "\nfuseport bench: stopping; the file keeps every finished (op, shape) "
                            "(again: stop at once)\n";
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
}

typedef struct bench_run {
  fp_bench_cli *cli;
  bool tty;
  double t0; /* seconds */
  int resumed;
  fp_status write_status;
  const char *hang_in; /* test hook: FP_BENCH_TEST_HANG_IN (below) */
  bool hang_armed;
} bench_run;

/* Test hook: FP_BENCH_TEST_HANG_IN=OP makes the run hang inside the first
 * group of OP it runs, after that group's first cell (as a kernel or a
 * driver can), until SIGINT or SIGTERM or for 10 minutes, so that a test can
 * kill it there (tests/test_resume.c). Not FUSEPORT_*: it changes no result,
 * so it is not recorded in meta.environment and a resume need not set it. */
static void test_hang(bench_run *br) {
  if (!br->hang_armed)
    return;
  br->hang_armed = false;
  for (int k = 0; k < 6000 && !stop_flag; ++k) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void hms(double s, char *buf, size_t len) {
  long t = (long)(s + 0.5);
  snprintf(buf, len, "%02ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static void on_cell(void *user, const fp_cell *c, int done, int total) {
  bench_run *br = user;
  test_hang(br);
  if (!br->tty)
    return;
  double el = now_s() - br->t0;
  char e[32], left[32] = "--:--:--";
  hms(el, e, sizeof e);
  int ran = done - br->resumed;
  if (ran > 0)
    hms(el / ran * (total - done), left, sizeof left);
  char shape[128];
  fp_shape_format(&c->shape, shape, sizeof shape);
  fprintf(stderr, "\r\033[K[%d/%d cells] %s elapsed, ~%s left  %s %s %s %s", done, total, e, left,
          c->op, c->variant, shape, fp_cell_status_name(c->status));
  fflush(stderr);
}

static fp_status write_out(const fp_bench_cli *cli, fp_results *r) {
  char *text = NULL;
  fp_status st =
      cli->format == FP_FORMAT_CSV ? fp_results_to_csv(r, &text) : fp_results_to_json(r, &text);
  if (st == FP_OK)
    st = fp_write_file_atomic(cli->out, text, strlen(text));
  free(text);
  return st;
}

static fp_status on_group(void *user, fp_results *r) {
  bench_run *br = user;
  br->hang_armed = false;
  return br->cli->out != NULL ? write_out(br->cli, r) : FP_OK;
}

/* Before a group: the file says it runs, durably (fp_write_file_atomic
 * syncs the file and its directory), so that a process killed inside it
 * leaves a file that names it. */
static fp_status on_group_start(void *user, fp_results *r) {
  bench_run *br = user;
  fp_status st = br->cli->out != NULL ? write_out(br->cli, r) : FP_OK;
  br->hang_armed = br->hang_in != NULL && strcmp(br->hang_in, r->meta.running_key.op) == 0;
  if (br->hang_armed)
    br->hang_in = NULL; /* the first such group only */
  return st;
}

/* The best backend with a device: cuda > opencl > cpu. */
static const char *best_backend(void) {
  static const fp_backend_kind order[] = {FP_BACKEND_CUDA, FP_BACKEND_OPENCL, FP_BACKEND_CPU};
  for (int k = 0; k < 3; ++k)
    if (fp_backend_compiled(order[k]) && fp_backend_device_count(order[k], NULL) > 0)
      return fp_backend_name(order[k]);
  return "cpu";
}

static int run_bench(fp_bench_cli *cli) {
  fp_results r;
  fp_results_init(&r);
  if (cli->resume != NULL) {
    if (fp_results_read_file(cli->resume, &r) != FP_OK) {
      fprintf(stderr, "fuseport bench: --resume: %s\n", fp_last_error());
      return FP_EXIT_FAIL;
    }
    if (!fp_bench_resume_spec(cli, &r, cli->resume)) {
      fp_results_free(&r);
      return FP_EXIT_USAGE;
    }
    fp_bench_resume_note(&r, cli->retry_errors);
    if (cli->retry_errors) {
      int n = fp_results_remove_status(&r, FP_CELL_ERROR);
      if (!cli->quiet)
        fprintf(stderr, "fuseport bench: --retry-errors: %d error cells%s run again\n", n,
                r.meta.running ? " and the group a killed run was inside" : "");
      r.meta.running = false;
    }
  }
  if (cli->target.backend == NULL) {
    cli->target.backend = best_backend();
    if (!cli->quiet)
      fprintf(stderr, "fuseport bench: no --backend given; using %s (the best present)\n",
              cli->target.backend);
  }
  fp_context *ctx = fp_cli_open(&cli->target);
  if (ctx == NULL) {
    fp_results_free(&r);
    return FP_EXIT_FAIL;
  }
  int rc = FP_EXIT_OK;
  fp_status st = FP_OK;
  if (cli->resume != NULL) {
    if (!fp_bench_resume_device(&r, cli->resume, ctx))
      rc = FP_EXIT_FAIL;
  } else {
    st = fp_bench_meta_init(ctx, &cli->spec, &r);
    if (st == FP_OK) {
      double gbps = NAN;
      if (fp_bench_copy_bandwidth(ctx, &gbps) != FP_OK)
        fprintf(stderr,
                "fuseport bench: warning: the copy bandwidth could not be measured (%s); "
                "bw_frac will be null\n",
                fp_last_error());
      r.meta.copy_gbps = gbps;
      st = fp_bench_peak_tflops(ctx, &cli->spec, &r);
    }
  }
  bench_run br = {.cli = cli,
                  .tty = !cli->quiet && isatty(STDERR_FILENO) == 1,
                  .t0 = now_s(),
                  .resumed = r.n_cells,
                  .write_status = FP_OK,
                  .hang_in = getenv("FP_BENCH_TEST_HANG_IN")};
  if (rc == FP_EXIT_OK && st == FP_OK && cli->out != NULL)
    st = write_out(cli, &r); /* a valid file from the start */
  fp_bench_summary sum;
  memset(&sum, 0, sizeof sum);
  if (rc == FP_EXIT_OK && st == FP_OK) {
    if (!cli->quiet) {
      fp_bench_plan plan;
      int total = 0;
      if (fp_bench_plan_build(&cli->spec, &plan) == FP_OK) {
        total = fp_bench_cell_count(&cli->spec, &plan);
        fp_bench_plan_free(&plan);
      }
      char shard[64] = "";
      if (cli->spec.shard_count > 1)
        snprintf(shard, sizeof shard, " in shard %d/%d", cli->spec.shard_index,
                 cli->spec.shard_count);
      const fp_device_info *dev = fp_context_device(ctx);
      fprintf(stderr,
              "fuseport bench: %s on %s, %d cells%s, %d already done; copy %.1f GB/s; cache "
              "flush: %s %.1f MiB (%s)\n",
              r.meta.backend, r.meta.device, total, shard, r.n_cells, r.meta.copy_gbps,
              cli->spec.flush_read ? "read" : "write",
              (double)fp_bench_run_flush_bytes(&cli->spec, dev) / (1 << 20),
              cli->spec.flush_bytes > 0 ? "--flush-mib" : "2x the device's last-level cache");
      for (int k = 0; k < r.meta.n_peaks; ++k) {
        const fp_peak *pk = &r.meta.peaks[k];
        if (isnan(pk->tflops))
          fprintf(stderr,
                  "fuseport bench: peak %s: unknown (%s); its cells' roof_frac uses the "
                  "bandwidth alone\n",
                  pk->dtype, pk->source);
        else
          fprintf(stderr, "fuseport bench: peak %s: %.4g TFLOP/s (%s)\n", pk->dtype, pk->tflops,
                  pk->source);
      }
    }
    stop_flag = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    fp_bench_hooks hooks;
    memset(&hooks, 0, sizeof hooks);
    hooks.stop = &stop_flag;
    hooks.on_cell = on_cell;
    hooks.on_group = on_group;
    hooks.on_group_start = on_group_start;
    hooks.user = &br;
    st = fp_bench_run(ctx, &cli->spec, &r, &hooks, &sum);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (br.tty)
      fputc('\n', stderr);
  }
  if (st != FP_OK) {
    fprintf(stderr, "fuseport bench: %s\n", fp_last_error());
    rc = FP_EXIT_FAIL;
  }
  if (rc == FP_EXIT_OK) {
    if (cli->out == NULL && cli->format != FP_FORMAT_TABLE) {
      char *text = NULL;
      if ((cli->format == FP_FORMAT_CSV ? fp_results_to_csv(&r, &text)
                                        : fp_results_to_json(&r, &text)) == FP_OK)
        fputs(text, stdout);
      else
        rc = FP_EXIT_FAIL;
      free(text);
    } else if (!cli->quiet) {
      fp_bench_print_table(stdout, &r);
    }
    fflush(stdout);
    int bad = sum.count[FP_CELL_FAIL] + sum.count[FP_CELL_ERROR];
    if (!cli->quiet)
      fprintf(stderr,
              "fuseport bench: %d of %d cells: %d ok, %d fail, %d oom, %d error, %d n/a (%d run "
              "now, %d resumed)%s%s\n",
              r.n_cells, sum.total, sum.count[FP_CELL_OK], sum.count[FP_CELL_FAIL],
              sum.count[FP_CELL_OOM], sum.count[FP_CELL_ERROR], sum.count[FP_CELL_UNSUPPORTED],
              sum.ran, sum.resumed, cli->out != NULL ? "; written to " : "",
              cli->out != NULL ? cli->out : "");
    if (sum.died > 0)
      fprintf(stderr,
              "fuseport bench: %d cells recorded as error without running: a process died "
              "inside their group on its retry too (see their message)\n",
              sum.died);
    if (sum.interrupted) {
      fprintf(stderr, "fuseport bench: interrupted with %d of %d cells done%s%s\n", r.n_cells,
              sum.total, cli->out != NULL ? "; finish with: fuseport bench --resume " : "",
              cli->out != NULL ? cli->out : "");
      rc = FP_EXIT_FAIL;
    }
    if (sum.leaked_bytes > 0) {
      fprintf(stderr, "fuseport bench: %llu device bytes were not freed after their cells\n",
              (unsigned long long)sum.leaked_bytes);
      rc = FP_EXIT_FAIL;
    }
    if (bad > 0)
      rc = FP_EXIT_FAIL;
  }
  fp_context_destroy(ctx);
  fp_results_free(&r);
  return rc;
}

int fp_cmd_bench(int argc, char **argv) {
  fp_bench_cli *cli = malloc(sizeof *cli); /* the spec is large for a stack */
  if (cli == NULL) {
    fprintf(stderr, "fuseport bench: no host memory\n");
    return FP_EXIT_FAIL;
  }
  int rc = fp_bench_parse_args(argc, argv, cli);
  if (rc == FP_EXIT_OK)
    rc = run_bench(cli);
  else if (rc < 0)
    rc = FP_EXIT_OK;
  free(cli);
  return rc;
}
