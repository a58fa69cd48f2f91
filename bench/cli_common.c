/* fuseport command: option helpers shared by the subcommands, and `list`. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *fp_cli_value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "fuseport: option %s needs a value\n", argv[*i]);
    return NULL;
  }
  *i += 1;
  return argv[*i];
}

bool fp_cli_parse_i64(const char *option, const char *text, int64_t min, int64_t max,
                      int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max) {
    fprintf(stderr, "fuseport: %s '%s' is not an integer in [%lld, %lld]\n", option, text,
            (long long)min, (long long)max);
    return false;
  }
  *out = v;
  return true;
}

bool fp_cli_parse_f64(const char *option, const char *text, double min, double max, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !(v >= min && v <= max)) {
    fprintf(stderr, "fuseport: %s '%s' is not a number in [%g, %g]\n", option, text, min, max);
    return false;
  }
  *out = v;
  return true;
}

bool fp_cli_parse_dims(const char *option, const char *text, int64_t *dims, int max, int *count) {
  *count = 0;
  const char *s = text;
  while (*s != '\0') {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || (*end != ',' && *end != '\0') || errno != 0 || v < 1 || v > FP_SHAPE_MAX_DIM ||
        (*end == ',' && end[1] == '\0'))
      break;
    if (*count >= max) {
      fprintf(stderr, "fuseport: %s lists more than %d values\n", option, max);
      return false;
    }
    dims[(*count)++] = v;
    s = *end == ',' ? end + 1 : end;
    if (*s == '\0')
      return true;
  }
  fprintf(stderr,
          "fuseport: %s '%s' is not a comma list of integers in [1, 2^53] (example: "
          "128,1024,65536)\n",
          option, text);
  return false;
}

bool fp_cli_parse_shape_list(const char *option, const char *text, fp_shape *shapes, int max,
                             int *count) {
  *count = 0;
  const char *s = text;
  while (*s != '\0') {
    fp_shape shape;
    shape.n = 0;
    for (;;) {
      char *end = NULL;
      errno = 0;
      long long v = strtoll(s, &end, 10);
      if (end == s || errno != 0 || v < 1 || v > FP_SHAPE_MAX_DIM || shape.n >= FP_SHAPE_MAX_DIMS)
        goto bad;
      shape.d[shape.n++] = v;
      s = end;
      if (*s == 'x' || *s == 'X') {
        ++s;
        continue;
      }
      if (*s != ',' && *s != '\0')
        goto bad;
      break;
    }
    if (shape.n < 2)
      goto bad;
    if (*count >= max) {
      fprintf(stderr, "fuseport: %s lists more than %d shapes\n", option, max);
      return false;
    }
    shapes[(*count)++] = shape;
    if (*s == ',') {
      ++s;
      if (*s == '\0')
        goto bad;
    }
  }
  if (*count > 0)
    return true;
bad:
  fprintf(stderr,
          "fuseport: %s '%s' is not a list of shapes of 2 to %d dimensions in [1, 2^53] (examples: "
          "128x4096,1000x3 for the row ops, 4096x4096x4096 for a GEMM M x N x K)\n",
          option, text, FP_SHAPE_MAX_DIMS);
  return false;
}

void fp_cli_shape_pattern(const fp_op *op, char *buf, size_t len) {
  if (len == 0)
    return;
  buf[0] = '\0';
  for (int g = 0; g < fp_op_grid_rank(op); ++g) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", g ? "x" : "", op->params[op->grid_param[g]].name);
  }
}

bool fp_cli_parse_ops(const char *text, const fp_op **ops, int max, int *count) {
  *count = 0;
  if (strcmp(text, "all") == 0) {
    for (int k = 0; k < fp_op_count() && k < max; ++k)
      ops[(*count)++] = fp_op_at(k);
    return true;
  }
  char buf[1024];
  if (strlen(text) >= sizeof buf) { /* never cut a name (or the list) short */
    fprintf(stderr, "fuseport: --op lists more than %zu characters\n", sizeof buf - 1);
    return false;
  }
  snprintf(buf, sizeof buf, "%s", text);
  char *save = NULL;
  for (char *name = strtok_r(buf, ",", &save); name != NULL; name = strtok_r(NULL, ",", &save)) {
    const fp_op *op = NULL;
    if (fp_op_lookup(name, &op) != FP_OK) {
      fprintf(stderr, "fuseport: %s\n", fp_last_error());
      return false;
    }
    if (*count >= max) {
      fprintf(stderr, "fuseport: --op lists more than %d ops\n", max);
      return false;
    }
    ops[(*count)++] = op;
  }
  if (*count == 0) {
    fprintf(stderr, "fuseport: --op needs at least one op name (or 'all')\n");
    return false;
  }
  return true;
}

int fp_cli_target_option(fp_cli_target *t, int argc, char **argv, int *i) {
  const char *opt = argv[*i];
  if (strcmp(opt, "--backend") == 0 || strcmp(opt, "-b") == 0) {
    t->backend = fp_cli_value(argc, argv, i);
    if (t->backend == NULL)
      return -1;
    fp_backend_kind kind;
    if (fp_backend_parse(t->backend, &kind) != FP_OK) {
      fprintf(stderr, "fuseport: %s\n", fp_last_error());
      return -1;
    }
    return 1;
  }
  if (strcmp(opt, "--device") == 0) {
    const char *v = fp_cli_value(argc, argv, i);
    int64_t d;
    if (v == NULL || !fp_cli_parse_i64("--device", v, 0, 1 << 20, &d))
      return -1;
    t->device = (int)d;
    return 1;
  }
  if (strcmp(opt, "--platform") == 0) {
    t->platform = fp_cli_value(argc, argv, i);
    return t->platform != NULL ? 1 : -1;
  }
  return 0;
}

fp_context *fp_cli_open(const fp_cli_target *t) {
  fp_context_options opts;
  fp_context_options_init(&opts);
  if (t->backend != NULL && fp_backend_parse(t->backend, &opts.backend) != FP_OK) {
    fprintf(stderr, "fuseport: %s\n", fp_last_error());
    return NULL;
  }
  opts.device_index = t->device;
  opts.platform = t->platform;
  fp_context *ctx = NULL;
  if (fp_context_create(&opts, &ctx) != FP_OK) {
    fprintf(stderr, "fuseport: cannot open the %s backend: %s\n", fp_backend_name(opts.backend),
            fp_last_error());
    return NULL;
  }
  return ctx;
}

/* ---- list ------------------------------------------------------------------------ */

static const char list_usage[] =
    "usage: fuseport list [--help]\n"
    "\n"
    "Prints the backends compiled into this build with the devices each one sees,\n"
    "then every operator with its family, variants and parameters (name=default).\n"
    "Parameters are set with --param name=value in check and bench.\n";

static void list_backends(void) {
  printf("backends:\n");
  for (int k = 0; k < FP_BACKEND_COUNT; ++k) {
    fp_backend_kind kind = (fp_backend_kind)k;
    if (!fp_backend_compiled(kind)) {
      printf("  %-7s not compiled into this build\n", fp_backend_name(kind));
      continue;
    }
    int n = fp_backend_device_count(kind, NULL);
    if (n == 0) {
      printf("  %-7s compiled; no device present\n", fp_backend_name(kind));
      continue;
    }
    for (int d = 0; d < n; ++d) {
      fp_context_options opts;
      fp_context_options_init(&opts);
      opts.backend = kind;
      opts.device_index = d;
      fp_context *ctx = NULL;
      if (fp_context_create(&opts, &ctx) == FP_OK) {
        const fp_device_info *info = fp_context_device(ctx);
        printf("  %-7s device %d: %s [%s] %.1f GiB\n", fp_backend_name(kind), d, info->name,
               info->platform, (double)info->global_mem_bytes / (double)(1ull << 30));
        fp_context_destroy(ctx);
      } else {
        printf("  %-7s device %d: cannot open: %s\n", fp_backend_name(kind), d, fp_last_error());
      }
    }
  }
}

int fp_cmd_list(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(list_usage, stdout);
      return FP_EXIT_OK;
    }
    fprintf(stderr, "fuseport list: unknown option '%s'\n\n%s", argv[i], list_usage);
    return FP_EXIT_USAGE;
  }
  list_backends();
  printf("\nops:\n");
  for (int k = 0; k < fp_op_count(); ++k) {
    const fp_op *op = fp_op_at(k);
    char variants[128] = "";
    for (int v = 0; v < op->n_variants; ++v) {
      size_t used = strlen(variants);
      snprintf(variants + used, sizeof variants - used, "%s%s", v ? "," : "", op->variants[v].name);
    }
    fp_problem p;
    fp_problem_init(&p, op);
    char params[512];
    fp_problem_describe(&p, params, sizeof params);
    printf("  %-18s %-11s %-14s %s\n", op->name, op->family, variants, params);
    printf("  %-18s %s\n", "", op->summary);
  }
  return FP_EXIT_OK;
}
