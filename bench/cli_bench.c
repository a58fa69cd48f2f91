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

/* A quick default: 2 x 2 shapes, every op, both variants; well under a
 * minute on the CPU backend and on PoCL. */
const int64_t fp_bench_default_dim0[2] = {256, 1024};
const int64_t fp_bench_default_dim1[2] = {256, 2048};

static const char bench_usage[] =
    "usage: fuseport bench [--backend cpu|opencl|cuda] [--device N] [--platform NAME]\n"
    "                      [--op NAME[,NAME...]|all] [--variants fused,unfused]\n"
    "                      [--shapes seed|MxN[,MxN...] | --dim0 LIST --dim1 LIST]\n"
    "                      [--param NAME=VALUE[,VALUE...]]... [--reps N | --rep-ms MS]\n"
    "                      [--warmup-ms MS] [--seed N] [--sample-elems N] [--flush-mib N]\n"
    "                      [--flush write|read]\n"
    "                      [--format table|csv|json] [--out FILE] [--resume FILE]\n"
    "                      [--retry-errors] [--shard I/N] [--quiet]\n"
    "\n"
    "Benchmarks each selected op and variant over a dim0 x dim1 grid on one\n"
    "device. Per (op, shape) the inputs are filled once with seeded random values\n"
    "and the float64 reference is computed once (on sampled rows for large cells);\n"
    "then each variant is checked against it and timed: warm-up runs, then\n"
    "repetitions each timed with device events (a monotonic clock on the cpu\n"
    "backend), the last-level cache flushed before each one by writing a buffer\n"
    "of at least twice its size (or reading it: --flush read). Reported per cell: median/min/max "
    "time, kernels\n"
    "launched per call, intermediate footprint and peak device bytes (counted by\n"
    "the backend layer), bytes and FLOPs of the cost model, GB/s and its fraction\n"
    "of the device's copy bandwidth (measured once per run), kernel build time,\n"
    "and the reference errors. A cell that does not fit is recorded as oom, a\n"
    "wrong result as fail (still timed), any other failure as error; the sweep\n"
    "goes on.\n"
    "\n"
    "options:\n"
    "  --backend B        cpu, opencl or cuda (default: the best present,\n"
    "                     cuda > opencl > cpu; printed)\n"
    "  --device N         device index within the backend (default: the first)\n"
    "  --platform NAME    OpenCL platform name substring, e.g. NVIDIA or Portable\n"
    "  --op LIST          comma-separated op names, or all (default: all)\n"
    "  --variants LIST    fused, unfused (default: fused,unfused; --variant too)\n"
    "  --shapes S         seed: the seed study's grid, dim0 and dim1 in\n"
    "                     {128, 256, ..., 65536} (100 shapes); or MxN[,MxN...]\n"
    "  --dim0 LIST        with --dim1: the grid of every dim0 x dim1 pair\n"
    "  --dim1 LIST        (default: --dim0 256,1024 --dim1 256,2048)\n"
    "  --param N=V[,V..]  set an op parameter (ops that have it); a list sweeps the\n"
    "                     values, e.g. --param training=false,true\n"
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
    "                     clean, timing the kernel alone\n"
    "  --format F         table (default), csv or json; without --out, printed\n"
    "  --out FILE         write the cells to FILE, json (default; also for *.json)\n"
    "                     or csv (*.csv or --format csv), rewritten atomically\n"
    "                     after every (op, shape) so a cut-short run leaves a valid\n"
    "                     file; the table is still printed unless --quiet\n"
    "  --resume FILE      continue the JSON file of an interrupted run: its cells\n"
    "                     are kept, the missing ones run; options not given are\n"
    "                     taken from the file, those given must match it. A\n"
    "                     group that a killed run was inside (a hang stopped by\n"
    "                     a timeout, a crash) is recorded as error, not rerun\n"
    "  --retry-errors     with --resume: run the error cells, and such a group,\n"
    "                     again\n"
    "  --shard I/N        run only shard I of N (0 <= I < N): the (op, shape)\n"
    "                     groups with index % N == I; join the files with merge\n"
    "  --quiet            no table, no progress, no summary\n"
    "\n"
    "A progress line (cells done/total, elapsed, estimate) goes to stderr when it\n"
    "is a terminal. Ctrl-C (or SIGTERM) stops at the next repetition: the\n"
    "unfinished (op, shape) is dropped, the file holds every finished one and\n"
    "--resume completes it.\n"
    "\n"
    "The FUSEPORT_* environment variables, which pick kernel builds, grids and\n"
    "compiler options (FUSEPORT_CUDA_ROW_BUILDS, FUSEPORT_CUDA_ELEM_GRID,\n"
    "FUSEPORT_CUDA_ELEM_BUILDS, FUSEPORT_OPENCL_BUILD_OPTIONS, ...; see the\n"
    "README), are recorded in the file's meta.environment; --resume needs the\n"
    "same ones.\n"
    "\n"
    "examples:\n"
    "  fuseport bench                                  # quick default run\n"
    "  fuseport bench --backend cuda --op all --shapes seed --out cuda.json\n"
    "  fuseport bench --resume cuda.json               # after an interruption\n"
    "  fuseport bench --backend opencl --op softmax,layernorm --dim0 1024,4096 \\\n"
    "      --dim1 128,65536 --reps 50 --format csv --out cl.csv\n"
    "  fuseport bench --backend cuda --device $I --shapes seed --shard $I/4 \\\n"
    "      --out shard$I.json      # then: fuseport merge all.json shard*.json\n"
    "\n"
    "exit status: 0 every cell ok or oom, 1 a cell failed or errored, the run was\n"
    "interrupted or could not run, 2 bad usage\n";

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
  int i = -1, n = -1, used = 0;
  if (sscanf(text, "%d/%d%n", &i, &n, &used) == 2 && text[used] == '\0' && text[0] != '-' &&
      n >= 1 && i >= 0 && i < n)
    return *index = i, *count = n, true;
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

static void seed_grid(fp_bench_spec *s) {
  s->n_shapes = 0;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) {
      s->shapes[s->n_shapes][0] = 128ll << i;
      s->shapes[s->n_shapes][1] = 128ll << j;
      s->n_shapes++;
    }
}

int fp_bench_parse_args(int argc, char **argv, fp_bench_cli *cli) {
  memset(cli, 0, sizeof *cli);
  cli->target.device = -1;
  fp_bench_spec *s = &cli->spec;
  fp_bench_spec_init(s);
  const char *op_list = "all", *format = NULL, *shapes = NULL;
  int64_t dim0[64], dim1[64];
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
      if (!fp_cli_parse_dims("--dim0", v, dim0, 64, &n0))
        return FP_EXIT_USAGE;
      cli->given |= FP_GIVEN_SHAPES;
    } else if (strcmp(a, "--dim1") == 0) {
      if (!fp_cli_parse_dims("--dim1", v, dim1, 64, &n1))
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
  if (shapes != NULL && strcmp(shapes, "seed") == 0) {
    seed_grid(s);
  } else if (shapes != NULL) {
    if (!fp_cli_parse_shapes("--shapes", shapes, s->shapes, FP_BENCH_MAX_SHAPES, &s->n_shapes))
      return FP_EXIT_USAGE;
  } else {
    const int64_t *d0 = n0 > 0 ? dim0 : fp_bench_default_dim0;
    const int64_t *d1 = n0 > 0 ? dim1 : fp_bench_default_dim1;
    int c0 = n0 > 0 ? n0 : 2, c1 = n0 > 0 ? n1 : 2;
    if (c0 * c1 > FP_BENCH_MAX_SHAPES) {
      usage_error("--dim0 x --dim1 makes more than 1024 shapes");
      return FP_EXIT_USAGE;
    }
    s->n_shapes = 0;
    for (int i = 0; i < c0; ++i)
      for (int j = 0; j < c1; ++j) {
        s->shapes[s->n_shapes][0] = d0[i];
        s->shapes[s->n_shapes][1] = d1[j];
        s->n_shapes++;
      }
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

/* ---- resume ------------------------------------------------------------------------------ */

/* Prints the first option in which a and b differ. */
static void print_option_difference(const cJSON *file, const cJSON *cmd, const char *path) {
  const cJSON *e;
  for (int pass = 0; pass < 2; ++pass) {
    const cJSON *side = pass == 0 ? file : cmd;
    cJSON_ArrayForEach(e, side) {
      const cJSON *x = cJSON_GetObjectItemCaseSensitive(file, e->string);
      const cJSON *y = cJSON_GetObjectItemCaseSensitive(cmd, e->string);
      if (x != NULL && y != NULL && cJSON_Compare(x, y, true))
        continue;
      char *xs = x != NULL ? cJSON_PrintUnformatted(x) : NULL;
      char *ys = y != NULL ? cJSON_PrintUnformatted(y) : NULL;
      fprintf(stderr, "fuseport bench: %s was run with %s %.200s; this command gives %.200s\n",
              path, e->string, xs != NULL ? xs : "(none)", ys != NULL ? ys : "(none)");
      cJSON_free(xs);
      cJSON_free(ys);
      return;
    }
  }
}

bool fp_bench_resume_spec(fp_bench_cli *cli, const fp_results *file, const char *path) {
  fp_bench_spec fs;
  if (fp_bench_spec_from_json(file->meta.options, &fs) != FP_OK) {
    fprintf(stderr, "fuseport bench: %s: its options cannot be resumed: %s\n", path,
            fp_last_error());
    return false;
  }
  /* the file's options, overridden by what the command line set */
  fp_bench_spec merged = fs;
  const fp_bench_spec *c = &cli->spec;
  if (cli->given & FP_GIVEN_OPS) {
    memcpy(merged.ops, c->ops, sizeof c->ops);
    merged.n_ops = c->n_ops;
  }
  if (cli->given & FP_GIVEN_VARIANTS) {
    memcpy(merged.variants, c->variants, sizeof c->variants);
    merged.n_variants = c->n_variants;
  }
  if (cli->given & FP_GIVEN_SHAPES) {
    memcpy(merged.shapes, c->shapes, sizeof c->shapes);
    merged.n_shapes = c->n_shapes;
  }
  if (cli->given & FP_GIVEN_PARAMS) {
    memcpy(merged.params, c->params, sizeof c->params);
    merged.n_params = c->n_params;
  }
  if (cli->given & FP_GIVEN_SEED)
    merged.seed = c->seed;
  if (cli->given & FP_GIVEN_REPS) {
    merged.reps = c->reps;
    merged.rep_ms = c->rep_ms;
  }
  if (cli->given & FP_GIVEN_WARMUP)
    merged.warmup_ms = c->warmup_ms;
  if (cli->given & FP_GIVEN_SAMPLE)
    merged.sample_elems = c->sample_elems;
  if (cli->given & FP_GIVEN_FLUSH)
    merged.flush_bytes = c->flush_bytes;
  if (cli->given & FP_GIVEN_FLUSH_MODE)
    merged.flush_read = c->flush_read;
  if (cli->given & FP_GIVEN_SHARD) {
    merged.shard_index = c->shard_index;
    merged.shard_count = c->shard_count;
  }
  cJSON *mine = fp_bench_spec_to_json(&merged, true);
  bool same = mine != NULL && cJSON_Compare(mine, file->meta.options, true);
  if (!same && mine != NULL)
    print_option_difference(file->meta.options, mine, path);
  if (mine == NULL)
    fprintf(stderr, "fuseport bench: no host memory\n");
  cJSON_Delete(mine);
  if (!same)
    return false;
  cli->spec = merged;
  if (cli->target.backend == NULL) {
    snprintf(cli->backend_buf, sizeof cli->backend_buf, "%s", file->meta.backend);
    cli->target.backend = cli->backend_buf;
  } else if (strcmp(cli->target.backend, file->meta.backend) != 0) {
    fprintf(stderr, "fuseport bench: %s holds %s results; --backend %s cannot continue it\n", path,
            file->meta.backend, cli->target.backend);
    return false;
  }
  return true;
}

bool fp_bench_resume_device(const fp_results *file, const char *path, fp_context *ctx) {
  const fp_device_info *dev = fp_context_device(ctx);
  if (strcmp(dev->name, file->meta.device) != 0 ||
      strcmp(dev->platform, file->meta.platform) != 0) {
    fprintf(stderr,
            "fuseport bench: %s was measured on '%s' [%s]; this device is '%s' [%s] (choose it "
            "with --device/--platform)\n",
            path, file->meta.device, file->meta.platform, dev->name, dev->platform);
    return false;
  }
  /* The FUSEPORT_* variables pick builds and grids: a file measured under
   * others would mix two configurations. (Files from before this record
   * have none, and are resumed as they were.) */
  const cJSON *was = cJSON_GetObjectItemCaseSensitive(file->meta.extra, "environment");
  if (was != NULL) {
    cJSON *now = fp_bench_environment();
    const bool same = now != NULL && cJSON_Compare(was, now, true);
    if (!same) {
      char *a = cJSON_PrintUnformatted(was), *b = now != NULL ? cJSON_PrintUnformatted(now) : NULL;
      fprintf(stderr,
              "fuseport bench: %s was measured with the FUSEPORT_* environment %s; this run has "
              "%s: set the same variables to resume it\n",
              path, a != NULL ? a : "?", b != NULL ? b : "?");
      free(a);
      free(b);
    }
    cJSON_Delete(now);
    if (!same)
      return false;
  }
  return true;
}

/* ---- the table --------------------------------------------------------------------------- */

typedef struct table_ctx {
  const fp_results *r;
  const fp_grid *g;
  const char *variant;
} table_ctx;

static void fmt_time(double us, char *buf, size_t len) {
  if (us < 10)
    snprintf(buf, len, "%.2f", us);
  else if (us < 1000)
    snprintf(buf, len, "%.1f", us);
  else
    snprintf(buf, len, "%.0f", us);
}

static void relperf_value(void *user, int64_t d0, int64_t d1, char *buf, size_t len) {
  table_ctx *t = user;
  double pct;
  const char *mark;
  if (fp_relperf(fp_grid_cell(t->r, t->g, d0, d1, "fused"),
                 fp_grid_cell(t->r, t->g, d0, d1, "unfused"), &pct, &mark))
    snprintf(buf, len, "%.1f%%", pct);
  else
    snprintf(buf, len, "%s", mark);
}

static void time_value(void *user, int64_t d0, int64_t d1, char *buf, size_t len) {
  table_ctx *t = user;
  const fp_cell *c = fp_grid_cell(t->r, t->g, d0, d1, t->variant);
  const char *mark = fp_cell_mark(c);
  if (c != NULL && (c->status == FP_CELL_OK || c->status == FP_CELL_FAIL) && isfinite(c->median_us))
    fmt_time(c->median_us, buf, len); /* a failed cell was timed too */
  else
    snprintf(buf, len, "%s", mark != NULL ? mark : "-");
}

static void bw_value(void *user, int64_t d0, int64_t d1, char *buf, size_t len) {
  table_ctx *t = user;
  const fp_cell *c = fp_grid_cell(t->r, t->g, d0, d1, t->variant);
  const char *mark = fp_cell_mark(c);
  if (mark != NULL)
    snprintf(buf, len, "%s", mark);
  else if (isfinite(c->bw_frac))
    snprintf(buf, len, "%.0f%%", 100.0 * c->bw_frac);
  else if (isfinite(c->gbps))
    snprintf(buf, len, "%.1f", c->gbps);
  else
    snprintf(buf, len, "-");
}

static bool results_have_variant(const fp_results *r, const char *variant) {
  for (int k = 0; k < r->n_cells; ++k)
    if (strcmp(r->cells[k].variant, variant) == 0)
      return true;
  return false;
}

void fp_bench_print_table(FILE *f, const fp_results *r) {
  fp_grid_set set;
  if (fp_grid_set_build(r, &set) != FP_OK) {
    fprintf(f, "(no memory for the tables: %s)\n", fp_last_error());
    return;
  }
  bool both = results_have_variant(r, "fused") && results_have_variant(r, "unfused");
  const char *shown = results_have_variant(r, "fused") ? "fused"
                      : r->n_cells > 0                 ? r->cells[0].variant
                                                       : "fused";
  bool copy = isfinite(r->meta.copy_gbps) && r->meta.copy_gbps > 0;
  fprintf(f, "fuseport bench: %s backend, %s [%s], copy bandwidth %s%.1f GB/s\n", r->meta.backend,
          r->meta.device, r->meta.platform, copy ? "" : "unknown ", copy ? r->meta.copy_gbps : 0.0);
  for (int k = 0; k < set.n; ++k) {
    const fp_grid *g = &set.grids[k];
    table_ctx t = {r, g, shown};
    char title[512];
    fprintf(f, "\n== %s%s%s%s ==\n", g->op, g->params[0] ? " (" : "", g->params,
            g->params[0] ? ")" : "");
    if (both)
      fp_grid_print(f, g,
                    "relative performance: unfused median / fused median (>100%: fusion wins)",
                    relperf_value, &t);
    snprintf(title, sizeof title, "%s%s median (us)", both ? "\n" : "", shown);
    fp_grid_print(f, g, title, time_value, &t);
    if (copy)
      snprintf(title, sizeof title, "\n%s bandwidth (%% of the %.0f GB/s device copy)", shown,
               r->meta.copy_gbps);
    else
      snprintf(title, sizeof title, "\n%s bandwidth (GB/s)", shown);
    fp_grid_print(f, g, title, bw_value, &t);
  }
  fp_grid_set_free(&set);
  int bad = 0;
  for (int k = 0; k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    if (c->status != FP_CELL_FAIL && c->status != FP_CELL_ERROR)
      continue;
    if (bad++ == 0)
      fprintf(f, "\nfailed cells:\n");
    fprintf(f, "  %-5s %s %s %lldx%lld%s%s: %s\n", c->status == FP_CELL_FAIL ? "FAIL" : "ERR",
            c->op, c->variant, (long long)c->dim0, (long long)c->dim1, c->params[0] ? " " : "",
            c->params, c->message);
  }
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
} bench_run;

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
  if (!br->tty)
    return;
  double el = now_s() - br->t0;
  char e[32], left[32] = "--:--:--";
  hms(el, e, sizeof e);
  int ran = done - br->resumed;
  if (ran > 0)
    hms(el / ran * (total - done), left, sizeof left);
  fprintf(stderr, "\r\033[K[%d/%d cells] %s elapsed, ~%s left  %s %s %lldx%lld %s", done, total, e,
          left, c->op, c->variant, (long long)c->dim0, (long long)c->dim1,
          fp_cell_status_name(c->status));
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
  return br->cli->out != NULL ? write_out(br->cli, r) : FP_OK;
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
    }
  }
  bench_run br = {cli, !cli->quiet && isatty(STDERR_FILENO) == 1, now_s(), r.n_cells, FP_OK};
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
    hooks.on_group_start = on_group;
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
              "fuseport bench: %d of %d cells: %d ok, %d fail, %d oom, %d error (%d run now, %d "
              "resumed)%s%s\n",
              r.n_cells, sum.total, sum.count[FP_CELL_OK], sum.count[FP_CELL_FAIL],
              sum.count[FP_CELL_OOM], sum.count[FP_CELL_ERROR], sum.ran, sum.resumed,
              cli->out != NULL ? "; written to " : "", cli->out != NULL ? cli->out : "");
    if (sum.died > 0)
      fprintf(stderr,
              "fuseport bench: %d cells recorded as error without running: an earlier run died "
              "inside them (see their message)\n",
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
