/* fuseport check: every op x variant x parameter combination x shape on one
 * backend against the float64 reference, on fresh random inputs with the
 * outputs poisoned first. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char check_usage[] =
    "usage: fuseport check [--backend cpu|opencl|cuda] [--device N] [--platform NAME]\n"
    "                      [--op NAME[,NAME...]|all] [--variant NAME[,NAME...]]\n"
    "                      [--shapes SHAPE[,SHAPE...]] [--param NAME=VALUE]... [--seed N]\n"
    "                      [--sample-elems N] [--quiet]\n"
    "\n"
    "Runs each selected op and variant on the backend and compares every output\n"
    "element with a float64 reference computed on the host: inputs are fresh\n"
    "random values (never zeros) from a counter-based generator, outputs are\n"
    "poisoned with a NaN pattern first, so an element a kernel never wrote fails.\n"
    "Ops with boolean or choice parameters (bias_dropout_add: training, layout;\n"
    "the matmul family: dtype, trans_b, add) are checked in every combination\n"
    "unless --param fixes one. The kernels each run launches and the library\n"
    "calls it makes (cuBLAS, CLBlast) are checked against the op's cost model\n"
    "too. A variant the backend cannot run (vendor off CUDA, a type its library\n"
    "lacks) is reported n/a, not as a failure.\n"
    "\n"
    "options:\n"
    "  --backend B        cpu (default), opencl or cuda\n"
    "  --device N         device index within the backend (default: the first)\n"
    "  --platform NAME    OpenCL platform name substring, e.g. NVIDIA or Portable\n"
    "  --op LIST          comma-separated op names, or all (default)\n"
    "  --variant LIST     fused, unfused, vendor, memeff (default: every variant)\n"
    "  --shapes LIST      shapes of the ops' ranks: MxN for the row ops, MxNxK for\n"
    "                     the GEMMs (MxNxKxP for matmul_matmul), NxCxHxWxK\n"
    "                     [xR[xstride]] for the convolutions, BxHxSxD or\n"
    "                     BxHxSxSKxD for attention; an op runs the\n"
    "                     shapes of its rank. Default: each op's odd shapes (row\n"
    "                     ops 1x1,3x3,1x1000,3x1000,1000x3,13x17,300x59,\n"
    "                     7x65537,2x262144,1x300007,3x262147,128x256,256x128,\n"
    "                     33x4097,70x509,66x30001,30x12000;\n"
    "                     GEMMs 1x1x1,7x33x100,33x7x1000,100x100x100,...; see\n"
    "                     fuseport list)\n"
    "  --param NAME=VAL   set a parameter of the ops that have it (repeatable),\n"
    "                     e.g. --param training=true --param p=0.1\n"
    "  --seed N           input seed (default: from the clock; printed)\n"
    "  --sample-elems N   check only sampled rows when outputs exceed N elements\n"
    "                     (default 0: check every element)\n"
    "  --quiet            print failures and the summary only\n"
    "\n"
    "examples:\n"
    "  fuseport check --backend cpu\n"
    "  fuseport check --backend opencl --platform Portable --op softmax --shapes 3x65537\n"
    "  fuseport check --backend cuda --op bias_dropout_add --param training=true\n"
    "  fuseport check --backend cuda --op matmul_split_act --shapes 4097x4097x4097 \\\n"
    "      --param dtype=bf16\n"
    "\n"
    "exit status: 0 every case passed, 1 a case failed or errored, 2 bad usage\n";

#define MAX_SHAPES 64
#define MAX_PARAMS 16

/* The row ops' default: odd shapes and powers of two; on an H100 they reach
 * every build of the CUDA row kernels (see tests/test_ops.c). Ops with
 * shapes of their own (op.h, check_shapes) use those. */
static const int64_t default_shapes[][2] = {
    {1, 1},     {3, 3},     {1, 1000},   {3, 1000},   {1000, 3},   {13, 17},
    {300, 59},  {7, 65537}, {2, 262144}, {1, 300007}, {3, 262147}, {128, 256},
    {256, 128}, {33, 4097}, {70, 509},   {66, 30001}, {30, 12000}};

typedef struct check_opts {
  fp_cli_target target;
  const fp_op *ops[64];
  int n_ops;
  const char *variants;        /* NULL: all */
  fp_shape shapes[MAX_SHAPES]; /* --shapes; none: each op's default */
  int n_shapes;
  char *param_names[MAX_PARAMS];
  const char *param_values[MAX_PARAMS];
  int n_params;
  uint64_t seed;
  int64_t sample_elems;
  bool quiet;
} check_opts;

typedef struct check_tally {
  int pass, fail, error, unsupported;
  int invalid; /* --shapes the op refuses (a filter past the input, ...): bad input */
} check_tally;

static bool variant_selected(const check_opts *o, const char *name) {
  if (o->variants == NULL)
    return true;
  size_t len = strlen(name);
  for (const char *s = o->variants; *s != '\0';) {
    const char *comma = strchr(s, ',');
    size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
    if (n == len && strncmp(s, name, len) == 0)
      return true;
    s += n + (comma != NULL ? 1 : 0);
  }
  return false;
}

static bool param_fixed(const check_opts *o, const char *name) {
  for (int k = 0; k < o->n_params; ++k)
    if (strcmp(o->param_names[k], name) == 0)
      return true;
  return false;
}

/* Runs one case; returns 0 pass, 1 fail, 2 error, 3 unsupported (n/a). */
static int run_case(fp_context *ctx, const check_opts *o, const fp_problem *p, const fp_variant *v,
                    uint64_t seed) {
  char desc[256];
  fp_problem_describe(p, desc, sizeof desc);
  fp_io_desc io;
  p->op->describe(p, &io);
  fp_buffer *in[FP_MAX_TENSORS] = {NULL}, *out[FP_MAX_TENSORS] = {NULL};
  fp_plan *plan = NULL;
  fp_accuracy acc;
  memset(&acc, 0, sizeof acc);
  fp_counters before, after;
  fp_status st = fp_io_alloc(ctx, &io, in, out);
  if (st == FP_OK)
    st = fp_io_fill_inputs(ctx, &io, seed, in);
  if (st == FP_OK)
    st = fp_io_poison_outputs(ctx, &io, out);
  if (st == FP_OK)
    st = fp_plan_create(ctx, p, v, &plan);
  fp_counters_get(ctx, &before);
  if (st == FP_OK)
    st = fp_plan_execute(plan, in, out);
  fp_counters_get(ctx, &after);
  fp_host_tensor views[FP_MAX_TENSORS];
  fp_host_inputs_generated(&io, seed, views);
  fp_row_sample rows = fp_row_sample_for(p, &io, o->sample_elems);
  if (st == FP_OK)
    st = fp_check_outputs(ctx, p, &io, views, out, &rows, &acc);
  int result = 0;
  if (st == FP_ERR_UNSUPPORTED) {
    if (!o->quiet)
      printf("n/a   %-18s %-8s %s: %s\n", p->op->name, v->name, desc, fp_last_error());
    result = 3;
  } else if (st != FP_OK) {
    printf("ERROR %-18s %-8s %s: %s: %s\n", p->op->name, v->name, desc, fp_status_name(st),
           fp_last_error());
    result = 2;
  } else {
    uint64_t launched = after.kernels_launched - before.kernels_launched;
    uint64_t calls = after.library_calls - before.library_calls;
    int expected = fp_plan_cost(plan)->kernels;
    int expected_calls = fp_plan_cost(plan)->library_calls;
    bool count_ok = launched == (uint64_t)expected && calls == (uint64_t)expected_calls;
    result = (acc.ok && count_ok) ? 0 : 1;
    if (result != 0 || !o->quiet)
      printf("%s  %-18s %-8s %-44s max_abs=%.2e max_rel=%.2e rel_l2=%.2e kernels=%llu%s\n",
             result == 0 ? "PASS" : "FAIL", p->op->name, v->name, desc, acc.max_abs_err,
             acc.max_rel_err, acc.rel_l2_err, (unsigned long long)launched,
             calls > 0 ? (calls == 1 ? " +1 library call" : " +2 library calls") : "");
    if (!acc.ok)
      printf("      %lld of %lld elements outside the tolerance; first: %s\n", (long long)acc.bad,
             (long long)acc.checked, acc.first_bad);
    if (!count_ok)
      printf("      the cost model says %d kernels and %d library calls, %llu and %llu ran\n",
             expected, expected_calls, (unsigned long long)launched, (unsigned long long)calls);
  }
  fp_plan_destroy(plan);
  fp_io_free(&io, in, out);
  return result;
}

/* Walks every combination of the op's unfixed boolean/choice parameters. */
static void run_combinations(fp_context *ctx, const check_opts *o, fp_problem *p, int param,
                             const fp_variant *v, uint64_t seed, check_tally *t) {
  const fp_op *op = p->op;
  for (; param < op->n_params; ++param) {
    const fp_param_decl *d = &op->params[param];
    if ((d->type == FP_PARAM_BOOL || d->type == FP_PARAM_CHOICE) && !param_fixed(o, d->name)) {
      double saved = p->v[param];
      for (double value = d->min; value <= d->max; value += 1.0) {
        p->v[param] = value;
        run_combinations(ctx, o, p, param + 1, v, seed, t);
      }
      p->v[param] = saved;
      return;
    }
  }
  int r = run_case(ctx, o, p, v, seed);
  if (r == 0)
    t->pass++;
  else if (r == 1)
    t->fail++;
  else if (r == 3)
    t->unsupported++;
  else
    t->error++;
  fflush(stdout);
}

static int parse_check(int argc, char **argv, check_opts *o) {
  memset(o, 0, sizeof *o);
  o->target.device = -1;
  o->seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
  const char *op_list = "all";
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    int t = fp_cli_target_option(&o->target, argc, argv, &i);
    if (t < 0)
      return FP_EXIT_USAGE;
    if (t > 0)
      continue;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(check_usage, stdout);
      return -1;
    } else if (strcmp(a, "--op") == 0) {
      if ((op_list = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--variant") == 0) {
      if ((o->variants = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--shapes") == 0) {
      const char *v = fp_cli_value(argc, argv, &i);
      if (v == NULL || !fp_cli_parse_shape_list("--shapes", v, o->shapes, MAX_SHAPES, &o->n_shapes))
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--param") == 0) {
      const char *v = fp_cli_value(argc, argv, &i);
      if (v == NULL)
        return FP_EXIT_USAGE;
      const char *eq = strchr(v, '=');
      if (eq == NULL || eq == v || o->n_params >= MAX_PARAMS) {
        fprintf(stderr, "fuseport check: --param wants NAME=VALUE, got '%s'\n", v);
        return FP_EXIT_USAGE;
      }
      o->param_names[o->n_params] = strndup(v, (size_t)(eq - v));
      o->param_values[o->n_params++] = eq + 1;
    } else if (strcmp(a, "--seed") == 0) {
      const char *v = fp_cli_value(argc, argv, &i);
      int64_t s;
      if (v == NULL || !fp_cli_parse_i64("--seed", v, 0, INT64_MAX, &s))
        return FP_EXIT_USAGE;
      o->seed = (uint64_t)s;
    } else if (strcmp(a, "--sample-elems") == 0) {
      const char *v = fp_cli_value(argc, argv, &i);
      if (v == NULL || !fp_cli_parse_i64("--sample-elems", v, 0, INT64_MAX, &o->sample_elems))
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--quiet") == 0) {
      o->quiet = true;
    } else {
      fprintf(stderr, "fuseport check: unknown option '%s' (see fuseport check --help)\n", a);
      return FP_EXIT_USAGE;
    }
  }
  if (!fp_cli_parse_ops(op_list, o->ops, 64, &o->n_ops))
    return FP_EXIT_USAGE;
  if (o->variants != NULL) {
    bool any = false;
    for (int k = 0; k < o->n_ops; ++k)
      for (int v = 0; v < o->ops[k]->n_variants; ++v)
        any = any || variant_selected(o, o->ops[k]->variants[v].name);
    if (!any) {
      fprintf(stderr, "fuseport check: no selected op has a variant in '%s'\n", o->variants);
      return FP_EXIT_USAGE;
    }
  }
  /* every op must have a shape of its rank */
  for (int k = 0; o->n_shapes > 0 && k < o->n_ops; ++k) {
    bool any = false;
    for (int s = 0; s < o->n_shapes; ++s)
      any = any || fp_op_takes_rank(o->ops[k], o->shapes[s].n);
    if (!any) {
      fprintf(stderr,
              "fuseport check: op %s takes shapes of %d dimensions and --shapes lists none "
              "(select ops with --op)\n",
              o->ops[k]->name, fp_op_grid_rank(o->ops[k]));
      return FP_EXIT_USAGE;
    }
  }
  /* every --param must apply to at least one selected op, and parse there */
  for (int k = 0; k < o->n_params; ++k) {
    bool used = false;
    for (int j = 0; j < o->n_ops; ++j) {
      fp_problem p;
      fp_problem_init(&p, o->ops[j]);
      fp_status st = fp_problem_set(&p, o->param_names[k], o->param_values[k]);
      if (st == FP_OK) {
        used = true;
      } else if (st != FP_ERR_NOT_FOUND) { /* the op has it, the value is bad */
        fprintf(stderr, "fuseport check: %s\n", fp_last_error());
        return FP_EXIT_USAGE;
      }
    }
    if (!used) {
      fprintf(stderr, "fuseport check: no selected op has a parameter '%s'\n", o->param_names[k]);
      return FP_EXIT_USAGE;
    }
  }
  return FP_EXIT_OK;
}

static void free_check(check_opts *o) {
  for (int k = 0; k < o->n_params; ++k)
    free(o->param_names[k]);
}

int fp_cmd_check(int argc, char **argv) {
  check_opts o;
  int rc = parse_check(argc, argv, &o);
  if (rc != FP_EXIT_OK) {
    free_check(&o);
    return rc < 0 ? FP_EXIT_OK : rc;
  }
  fp_context *ctx = fp_cli_open(&o.target);
  if (ctx == NULL) {
    free_check(&o);
    return FP_EXIT_FAIL;
  }
  const fp_device_info *dev = fp_context_device(ctx);
  printf("fuseport check: backend %s, device %s [%s], seed %llu\n",
         fp_backend_name(fp_context_backend(ctx)), dev->name, dev->platform,
         (unsigned long long)o.seed);
  check_tally tally = {0, 0, 0, 0, 0};
  for (int k = 0; k < o.n_ops; ++k) {
    const fp_op *op = o.ops[k];
    const int rank = fp_op_grid_rank(op);
    /* this op's shapes: those of --shapes of its rank, else its own list */
    fp_shape shapes[MAX_SHAPES];
    int n_shapes = 0;
    if (o.n_shapes > 0) {
      for (int s = 0; s < o.n_shapes; ++s)
        if (fp_op_takes_rank(op, o.shapes[s].n))
          shapes[n_shapes++] = o.shapes[s];
    } else if (op->check_shapes != NULL) {
      for (int s = 0; s < op->n_check_shapes / rank && n_shapes < MAX_SHAPES; ++s) {
        shapes[n_shapes].n = rank;
        memcpy(shapes[n_shapes].d, op->check_shapes + s * rank, sizeof(int64_t) * (size_t)rank);
        n_shapes++;
      }
    } else {
      for (size_t s = 0; s < sizeof default_shapes / sizeof default_shapes[0]; ++s) {
        shapes[n_shapes].n = 2;
        shapes[n_shapes].d[0] = default_shapes[s][0];
        shapes[n_shapes].d[1] = default_shapes[s][1];
        n_shapes++;
      }
    }
    for (int s = 0; s < n_shapes; ++s) {
      fp_problem p;
      fp_problem_init(&p, op);
      for (int j = 0; j < o.n_params; ++j)
        (void)fp_problem_set(&p, o.param_names[j], o.param_values[j]); /* validated above */
      fp_status st = fp_problem_set_grid(&p, shapes[s].d, shapes[s].n);
      if (st == FP_OK)
        st = fp_problem_validate(&p);
      if (st != FP_OK) {
        char text[128];
        fp_shape_format(&shapes[s], text, sizeof text);
        printf("INVALID %-16s shape %s: %s\n", op->name, text, fp_last_error());
        tally.invalid++;
        continue;
      }
      for (int v = 0; v < op->n_variants; ++v)
        if (variant_selected(&o, op->variants[v].name))
          run_combinations(ctx, &o, &p, 0, &op->variants[v], o.seed + (uint64_t)s, &tally);
    }
  }
  printf("fuseport check: %d passed, %d failed, %d errors, %d n/a", tally.pass, tally.fail,
         tally.error, tally.unsupported);
  if (tally.invalid > 0)
    printf(", %d invalid shapes", tally.invalid);
  printf(" (backend %s, seed %llu)\n", fp_backend_name(fp_context_backend(ctx)),
         (unsigned long long)o.seed);
  fp_context_destroy(ctx);
  free_check(&o);
  /* a failure outranks bad input; bad input (exit 2) outranks a clean pass */
  if (tally.fail > 0 || tally.error > 0)
    return FP_EXIT_FAIL;
  if (tally.invalid > 0)
    return FP_EXIT_USAGE;
  return tally.pass > 0 ? FP_EXIT_OK : FP_EXIT_FAIL;
}
