/* fuseport compare: per-cell time ratios of two bench result files (backend
 * vs backend, machine vs machine, commit vs commit), geometric mean per op. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_bench.h"

static const char compare_usage[] =
    "usage: fuseport compare A.json B.json [--variant NAME] [--format table|csv|json]\n"
    "                        [--out FILE]\n"
    "\n"
    "For each op (and parameter set) present in both files, prints the ratio =\n"
    "A median time / B median time of one variant: above 1, B is faster. Rank-2\n"
    "ops (dim0 x dim1) get a grid per parameter set; ops of rank 3 and more (a\n"
    "GEMM's MxNxK) a list per op, one row per (shape, params) with both medians.\n"
    "A cell missing from either file shows '-'; one that is not ok in either\n"
    "shows OOM, FAIL, ERR or n/a (unsupported) and is left out of the means.\n"
    "Under each grid or list, the geometric mean of the ratios of the cells ok in\n"
    "both; at the end, the geometric mean over every such cell. Cells are matched\n"
    "by op, parameters, shape and variant, so the files may come from different\n"
    "backends, machines or commits.\n"
    "\n"
    "options:\n"
    "  --variant NAME   fused (default) or unfused; A_NAME:B_NAME pairs different\n"
    "                   variants, e.g. fused:compile against bench/torch_bench.py\n"
    "  --format F       table (default), csv (one row per matched cell:\n"
    "                   op,params,variant,shape,dim0,dim1,a_status,b_status,\n"
    "                   a_median_us,b_median_us,ratio; shape as MxNxK, dim0 and\n"
    "                   dim1 for rank-2 cells only) or json\n"
    "  --out FILE       write there instead of stdout\n"
    "\n"
    "examples:\n"
    "  fuseport compare opencl.json cuda.json          # OpenCL vs CUDA, same GPU\n"
    "  fuseport compare old.json new.json --variant unfused --format csv\n"
    "\n"
    "exit status: 0 compared, 1 a file cannot be read or the files have no cell\n"
    "ok in both, 2 bad usage\n";

typedef struct compare_ctx {
  const fp_results *a, *b;
  const fp_grid *g;
  const char *variant;   /* A's variant */
  const char *variant_b; /* B's variant (the same unless --variant A:B) */
} compare_ctx;

/* The points of a view: dim0 x dim1 for a grid, its rows for a list. */
static int view_points(const fp_grid *g) { return g->rank == 2 ? g->n0 * g->n1 : g->n_rows; }

/* Point k of the view: its shape and params, and each file's cell. */
static void view_point(const compare_ctx *c, int k, fp_shape *shape, const char **params,
                       const fp_cell **ca, const fp_cell **cb) {
  const fp_grid *g = c->g;
  if (g->rank == 2) {
    *shape = fp_shape_2d(g->dim0[k / g->n1], g->dim1[k % g->n1]);
    *params = g->params;
    *ca = fp_grid_cell(c->a, g, shape->d[0], shape->d[1], c->variant);
    *cb = fp_grid_cell(c->b, g, shape->d[0], shape->d[1], c->variant_b);
  } else {
    *shape = g->rows[k].shape;
    *params = g->rows[k].params;
    *ca = fp_list_cell(c->a, g, &g->rows[k], c->variant);
    *cb = fp_list_cell(c->b, g, &g->rows[k], c->variant_b);
  }
}

/* Ratio of two cells; false with *mark when they have none. */
static bool cell_ratio(const fp_cell *ca, const fp_cell *cb, double *ratio, const char **mark) {
  *ratio = NAN;
  const char *ma = fp_cell_mark(ca), *mb = fp_cell_mark(cb);
  if (ma == NULL && mb == NULL && cb->median_us > 0 && isfinite(ca->median_us)) {
    *ratio = ca->median_us / cb->median_us;
    return true;
  }
  static const char *const priority[] = {"-", "ERR", "FAIL", "OOM", "n/a"};
  *mark = "-";
  for (size_t k = 0; k < sizeof priority / sizeof priority[0]; ++k)
    if ((ma != NULL && strcmp(ma, priority[k]) == 0) ||
        (mb != NULL && strcmp(mb, priority[k]) == 0)) {
      *mark = priority[k];
      break;
    }
  return false;
}

static void ratio_value(void *user, int64_t d0, int64_t d1, char *buf, size_t len) {
  const compare_ctx *c = user;
  double ratio;
  const char *mark;
  if (cell_ratio(fp_grid_cell(c->a, c->g, d0, d1, c->variant),
                 fp_grid_cell(c->b, c->g, d0, d1, c->variant_b), &ratio, &mark))
    snprintf(buf, len, "%.3f", ratio);
  else
    snprintf(buf, len, "%s", mark);
}

/* Geometric mean of the view's ratios (NaN when none); *n gets their count. */
static double grid_geomean(compare_ctx *c, int *n, double *log_sum) {
  *n = 0;
  double sum = 0;
  for (int k = 0; k < view_points(c->g); ++k) {
    fp_shape shape;
    const char *params, *mark;
    const fp_cell *ca, *cb;
    double ratio;
    view_point(c, k, &shape, &params, &ca, &cb);
    if (cell_ratio(ca, cb, &ratio, &mark) && ratio > 0) {
      sum += log(ratio);
      (*n)++;
    }
  }
  *log_sum = sum;
  return *n > 0 ? exp(sum / *n) : NAN;
}

/* A list's table: shape, params, both medians, the ratio. */
static void print_list(FILE *out, compare_ctx *c) {
  const fp_grid *g = c->g;
  enum { COLS = 5, W = 300 };
  char(*text)[W] = calloc((size_t)(g->n_rows > 0 ? g->n_rows : 1) * COLS, sizeof *text);
  const char **ptrs = calloc((size_t)(g->n_rows > 0 ? g->n_rows : 1) * COLS, sizeof *ptrs);
  if (text == NULL || ptrs == NULL) {
    fprintf(out, "(no memory for the table)\n");
    free(text);
    free(ptrs);
    return;
  }
  for (int k = 0; k < g->n_rows; ++k) {
    fp_shape shape;
    const char *params, *mark;
    const fp_cell *ca, *cb;
    double ratio;
    view_point(c, k, &shape, &params, &ca, &cb);
    char(*row)[W] = text + (size_t)k * COLS;
    fp_shape_format(&shape, row[0], W);
    snprintf(row[1], W, "%s", params[0] ? params : "-");
    fp_fmt_cell_time(ca, row[2], W);
    fp_fmt_cell_time(cb, row[3], W);
    if (cell_ratio(ca, cb, &ratio, &mark))
      snprintf(row[4], W, "%.3f", ratio);
    else
      snprintf(row[4], W, "%s", mark);
    for (int j = 0; j < COLS; ++j)
      ptrs[k * COLS + j] = row[j];
  }
  const char *header[COLS] = {"shape", "params", "A us", "B us", "A/B"};
  fp_text_table_print(out, header, COLS, ptrs, g->n_rows, 2);
  free(text);
  free(ptrs);
}

static void describe_file(FILE *f, const char *label, const char *path, const fp_results *r) {
  fprintf(f, "%s = %s: %s backend, %s [%s], commit %s, %s\n", label, path, r->meta.backend,
          r->meta.device, r->meta.platform, r->meta.git_commit, r->meta.date);
}

static cJSON *file_json(const char *path, const fp_results *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "file", path);
  cJSON_AddStringToObject(o, "backend", r->meta.backend);
  cJSON_AddStringToObject(o, "device", r->meta.device);
  cJSON_AddStringToObject(o, "platform", r->meta.platform);
  cJSON_AddStringToObject(o, "git_commit", r->meta.git_commit);
  cJSON_AddStringToObject(o, "date", r->meta.date);
  cJSON_AddStringToObject(o, "host", r->meta.host);
  return o;
}

typedef enum { CMP_TABLE, CMP_CSV, CMP_JSON } cmp_format;

static int compare_files(const char *pa, const char *pb, const char *variant, const char *variant_b,
                         cmp_format format, FILE *out) {
  fp_results a, b, both;
  fp_results_init(&a);
  fp_results_init(&b);
  fp_results_init(&both);
  fp_grid_set set;
  memset(&set, 0, sizeof set);
  int rc = FP_EXIT_FAIL;
  cJSON *root = NULL;
  if (fp_results_read_file(pa, &a) != FP_OK || fp_results_read_file(pb, &b) != FP_OK) {
    fprintf(stderr, "fuseport compare: %s\n", fp_last_error());
    goto done;
  }
  /* the grids over the cells of either file */
  for (int k = 0; k < a.n_cells; ++k)
    if (fp_results_add(&both, &a.cells[k]) != FP_OK)
      goto nomem;
  for (int k = 0; k < b.n_cells; ++k)
    if (fp_results_add(&both, &b.cells[k]) != FP_OK)
      goto nomem;
  if (fp_grid_set_build(&both, &set) != FP_OK)
    goto nomem;
  double total_log = 0;
  int total_n = 0;
  for (int k = 0; k < set.n; ++k) { /* refuse before printing anything */
    compare_ctx c = {&a, &b, &set.grids[k], variant, variant_b};
    int n = 0;
    double log_sum = 0;
    grid_geomean(&c, &n, &log_sum);
    total_log += log_sum;
    total_n += n;
  }
  if (total_n == 0) {
    fprintf(stderr, "fuseport compare: %s and %s have no %s cell that is ok in both\n", pa, pb,
            variant);
    goto done;
  }
  if (format == CMP_TABLE) {
    describe_file(out, "A", pa, &a);
    describe_file(out, "B", pb, &b);
    if (strcmp(variant, variant_b) == 0)
      fprintf(out, "ratio = A median / B median of the %s variant (>1: B is faster)\n", variant);
    else
      fprintf(out, "ratio = A's %s median / B's %s median (>1: B is faster)\n", variant, variant_b);
  } else if (format == CMP_CSV) {
    fprintf(out, "op,params,variant,shape,dim0,dim1,a_status,b_status,a_median_us,b_median_us,"
                 "ratio\n");
  } else {
    root = cJSON_CreateObject();
    if (root == NULL)
      goto nomem;
    cJSON_AddItemToObject(root, "a", file_json(pa, &a));
    cJSON_AddItemToObject(root, "b", file_json(pb, &b));
    cJSON_AddStringToObject(root, "variant", variant);
    cJSON_AddStringToObject(root, "ratio", "a.median_us / b.median_us (>1: b is faster)");
    cJSON_AddArrayToObject(root, "ops");
  }
  for (int k = 0; k < set.n; ++k) {
    const fp_grid *g = &set.grids[k];
    compare_ctx c = {&a, &b, g, variant, variant_b};
    int n = 0;
    double log_sum = 0;
    double gm = grid_geomean(&c, &n, &log_sum);
    if (format == CMP_TABLE) {
      char title[512], heading[600];
      fp_view_title(g, title, sizeof title);
      snprintf(heading, sizeof heading, "\n== %s ==", title);
      if (g->rank == 2) {
        fp_grid_print(out, g, heading, ratio_value, &c);
      } else {
        fprintf(out, "%s\n", heading);
        print_list(out, &c);
      }
      if (n > 0)
        fprintf(out, "geometric mean A/B: %.3f over %d cells (%s)\n", gm, n,
                gm > 1   ? "B faster"
                : gm < 1 ? "A faster"
                         : "even");
      else
        fprintf(out, "geometric mean A/B: - (no cell ok in both)\n");
      continue;
    }
    cJSON *op_json = NULL, *grid_json = NULL;
    if (format == CMP_JSON) {
      op_json = cJSON_CreateObject();
      cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "ops"), op_json);
      cJSON_AddStringToObject(op_json, "op", g->op);
      cJSON_AddStringToObject(op_json, "params", g->params);
      cJSON_AddNumberToObject(op_json, "rank", g->rank);
      cJSON_AddNumberToObject(op_json, "geomean", gm);
      cJSON_AddNumberToObject(op_json, "cells", n);
      grid_json = cJSON_AddArrayToObject(op_json, "grid");
    }
    for (int p = 0; p < view_points(g); ++p) {
      fp_shape shape;
      const char *params, *mark;
      const fp_cell *ca, *cb;
      double ratio;
      view_point(&c, p, &shape, &params, &ca, &cb);
      cell_ratio(ca, cb, &ratio, &mark);
      if (ca == NULL && cb == NULL)
        continue;
      const char *sa = ca != NULL ? fp_cell_status_name(ca->status) : "missing";
      const char *sb = cb != NULL ? fp_cell_status_name(cb->status) : "missing";
      double ma = ca != NULL ? ca->median_us : NAN, mb = cb != NULL ? cb->median_us : NAN;
      if (format == CMP_CSV) {
        char ra[32] = "", rb[32] = "", rr[32] = "", text[128], d0[24] = "", d1[24] = "";
        if (isfinite(ma))
          snprintf(ra, sizeof ra, "%.3f", ma);
        if (isfinite(mb))
          snprintf(rb, sizeof rb, "%.3f", mb);
        if (isfinite(ratio))
          snprintf(rr, sizeof rr, "%.6g", ratio);
        fp_shape_format(&shape, text, sizeof text);
        if (shape.n == 2) {
          snprintf(d0, sizeof d0, "%lld", (long long)shape.d[0]);
          snprintf(d1, sizeof d1, "%lld", (long long)shape.d[1]);
        }
        /* params hold spaces and '=', never a comma or a quote */
        fprintf(out, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", g->op, params, variant, text, d0, d1, sa,
                sb, ra, rb, rr);
      } else {
        cJSON *cell = cJSON_CreateObject();
        cJSON_AddItemToObject(cell, "shape", fp_shape_to_json(&shape));
        cJSON_AddStringToObject(cell, "params", params);
        cJSON_AddStringToObject(cell, "a_status", sa);
        cJSON_AddStringToObject(cell, "b_status", sb);
        cJSON_AddNumberToObject(cell, "a_median_us", ma);
        cJSON_AddNumberToObject(cell, "b_median_us", mb);
        cJSON_AddNumberToObject(cell, "ratio", ratio);
        cJSON_AddItemToArray(grid_json, cell);
      }
    }
  }
  double total = exp(total_log / total_n);
  if (format == CMP_TABLE) {
    fprintf(out, "\noverall geometric mean A/B: %.3f over %d cells\n", total, total_n);
  } else if (format == CMP_JSON) {
    cJSON_AddNumberToObject(root, "geomean", total);
    cJSON_AddNumberToObject(root, "cells", total_n);
    char *text = cJSON_Print(root);
    if (text == NULL)
      goto nomem;
    fprintf(out, "%s\n", text);
    cJSON_free(text);
  }
  rc = FP_EXIT_OK;
  goto done;
nomem:
  fprintf(stderr, "fuseport compare: no host memory\n");
done:
  cJSON_Delete(root);
  fp_grid_set_free(&set);
  fp_results_free(&a);
  fp_results_free(&b);
  fp_results_free(&both);
  return rc;
}

int fp_cmd_compare(int argc, char **argv) {
  const char *files[2] = {NULL, NULL}, *variant = "fused", *out_path = NULL;
  int n = 0;
  cmp_format format = CMP_TABLE;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(compare_usage, stdout);
      return FP_EXIT_OK;
    } else if (strcmp(a, "--variant") == 0) {
      if ((variant = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--out") == 0 || strcmp(a, "-o") == 0) {
      if ((out_path = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--format") == 0) {
      const char *v = fp_cli_value(argc, argv, &i);
      if (v == NULL)
        return FP_EXIT_USAGE;
      if (strcmp(v, "table") == 0)
        format = CMP_TABLE;
      else if (strcmp(v, "csv") == 0)
        format = CMP_CSV;
      else if (strcmp(v, "json") == 0)
        format = CMP_JSON;
      else {
        fprintf(stderr, "fuseport compare: --format '%s' is not table, csv or json\n", v);
        return FP_EXIT_USAGE;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "fuseport compare: unknown option '%s' (see fuseport compare --help)\n", a);
      return FP_EXIT_USAGE;
    } else if (n < 2) {
      files[n++] = a;
    } else {
      fprintf(stderr, "fuseport compare: want exactly two result files; '%s' is a third\n", a);
      return FP_EXIT_USAGE;
    }
  }
  if (n != 2) {
    fprintf(stderr, "fuseport compare: want two result files A.json B.json (see fuseport "
                    "compare --help)\n");
    return FP_EXIT_USAGE;
  }
  FILE *out = stdout;
  if (out_path != NULL && (out = fopen(out_path, "w")) == NULL) {
    fprintf(stderr, "fuseport compare: cannot write %s\n", out_path);
    return FP_EXIT_FAIL;
  }
  /* --variant A:B compares A's variant A with B's variant B, e.g. fuseport's
   * fused against torch_bench.py's compile */
  char variant_a[64];
  const char *colon = strchr(variant, ':');
  const char *variant_b = colon != NULL ? colon + 1 : variant;
  snprintf(variant_a, sizeof variant_a, "%.*s", colon != NULL ? (int)(colon - variant) : 63,
           variant);
  if (variant_a[0] == '\0' || variant_b[0] == '\0') {
    fprintf(stderr, "fuseport compare: --variant '%s' wants NAME or A_NAME:B_NAME\n", variant);
    if (out != stdout)
      fclose(out);
    return FP_EXIT_USAGE;
  }
  int rc = compare_files(files[0], files[1], variant_a, variant_b, format, out);
  if (out != stdout && fclose(out) != 0 && rc == FP_EXIT_OK) {
    fprintf(stderr, "fuseport compare: cannot write %s\n", out_path);
    rc = FP_EXIT_FAIL;
  }
  return rc;
}
