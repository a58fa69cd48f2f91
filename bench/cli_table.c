/* fuseport bench: the text tables -- dim0 x dim1 grids for rank-2 ops, one
 * list per op of rank 3 and more -- and the cell formatters that compare
 * shares. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_bench.h"

bool fp_op_name_compute_bound(const char *op) {
  const fp_op *o = fp_op_find(op);
  return o != NULL && o->compute_dtype != NULL;
}

void fp_fmt_time(double us, char *buf, size_t len) {
  if (us < 10)
    snprintf(buf, len, "%.2f", us);
  else if (us < 1000)
    snprintf(buf, len, "%.1f", us);
  else
    snprintf(buf, len, "%.0f", us);
}

/* Whether the cell has a median to show: ok, or fail (a failed cell was
 * timed too). */
static bool timed(const fp_cell *c) {
  return c != NULL && (c->status == FP_CELL_OK || c->status == FP_CELL_FAIL) &&
         isfinite(c->median_us);
}

void fp_fmt_cell_time(const fp_cell *c, char *buf, size_t len) {
  const char *mark = fp_cell_mark(c);
  if (timed(c))
    fp_fmt_time(c->median_us, buf, len);
  else
    snprintf(buf, len, "%s", mark != NULL ? mark : "-");
}

double fp_fmt_ratio(const fp_cell *num, const fp_cell *den, char *buf, size_t len) {
  const char *mark = fp_cell_mark_pair(num, den);
  if (mark == NULL && den->median_us > 0 && isfinite(num->median_us)) {
    const double ratio = num->median_us / den->median_us;
    snprintf(buf, len, "%.2f", ratio);
    return ratio;
  }
  snprintf(buf, len, "%s", mark != NULL ? mark : "-");
  return NAN;
}

void fp_fmt_tflops(const fp_cell *c, char *buf, size_t len) {
  const char *mark = fp_cell_mark(c);
  if (mark != NULL)
    snprintf(buf, len, "%s", mark);
  else if (isfinite(c->gflops))
    snprintf(buf, len, "%.3g", c->gflops / 1e3);
  else
    snprintf(buf, len, "-");
}

void fp_fmt_frac(const fp_cell *c, double frac, char *buf, size_t len) {
  const char *mark = fp_cell_mark(c);
  if (mark != NULL)
    snprintf(buf, len, "%s", mark);
  else if (!isfinite(frac))
    snprintf(buf, len, "-");
  else if (frac < 0.1)
    snprintf(buf, len, "%.1f%%", 100.0 * frac);
  else
    snprintf(buf, len, "%.0f%%", 100.0 * frac);
}

const char *fp_headline_variant(const char *const *names, int n) {
  for (int k = 0; k < n; ++k)
    if (strcmp(names[k], "fused") == 0)
      return names[k];
  return n > 0 ? names[0] : "fused";
}

void fp_view_title(const fp_grid *g, char *buf, size_t len) {
  if (g->rank == 2) {
    snprintf(buf, len, "%s%s%s%s", g->op, g->params[0] ? " (" : "", g->params,
             g->params[0] ? ")" : "");
    return;
  }
  const fp_op *op = fp_op_find(g->op);
  char pattern[64] = "";
  if (op != NULL && fp_op_grid_rank(op) == g->rank)
    fp_cli_shape_pattern(op, pattern, sizeof pattern);
  else
    snprintf(pattern, sizeof pattern, "%d dims", g->rank);
  snprintf(buf, len, "%s (shape %s)", g->op, pattern);
}

/* ---- rank 2: the grids ------------------------------------------------------------------ */

typedef struct table_ctx {
  const fp_results *r;
  const fp_grid *g;
  const char *variant;
} table_ctx;

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
  fp_fmt_cell_time(fp_grid_cell(t->r, t->g, d0, d1, t->variant), buf, len);
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

static void tflops_value(void *user, int64_t d0, int64_t d1, char *buf, size_t len) {
  table_ctx *t = user;
  fp_fmt_tflops(fp_grid_cell(t->r, t->g, d0, d1, t->variant), buf, len);
}

static void roof_value(void *user, int64_t d0, int64_t d1, char *buf, size_t len) {
  table_ctx *t = user;
  const fp_cell *c = fp_grid_cell(t->r, t->g, d0, d1, t->variant);
  fp_fmt_frac(c, c != NULL ? c->roof_frac : NAN, buf, len);
}

static void print_grid(FILE *f, const fp_results *r, const fp_grid *g) {
  const char *names[FP_RESULTS_MAX_VARIANTS];
  const int nv = fp_grid_variants(r, g, names, FP_RESULTS_MAX_VARIANTS);
  bool fused = false, unfused = false;
  for (int k = 0; k < nv; ++k) {
    fused = fused || strcmp(names[k], "fused") == 0;
    unfused = unfused || strcmp(names[k], "unfused") == 0;
  }
  const bool both = fused && unfused;
  table_ctx t = {r, g, fp_headline_variant(names, nv)};
  char title[512];
  if (both)
    fp_grid_print(f, g, "relative performance: unfused median / fused median (>100%: fusion wins)",
                  relperf_value, &t);
  snprintf(title, sizeof title, "%s%s median (us)", both ? "\n" : "", t.variant);
  fp_grid_print(f, g, title, time_value, &t);
  if (fp_op_name_compute_bound(g->op)) {
    snprintf(title, sizeof title, "\n%s TFLOP/s", t.variant);
    fp_grid_print(f, g, title, tflops_value, &t);
    snprintf(title, sizeof title, "\n%s roofline fraction", t.variant);
    fp_grid_print(f, g, title, roof_value, &t);
    return;
  }
  const bool copy = isfinite(r->meta.copy_gbps) && r->meta.copy_gbps > 0;
  if (copy)
    snprintf(title, sizeof title, "\n%s bandwidth (%% of the %.0f GB/s device copy)", t.variant,
             r->meta.copy_gbps);
  else
    snprintf(title, sizeof title, "\n%s bandwidth (GB/s)", t.variant);
  fp_grid_print(f, g, title, bw_value, &t);
}

/* ---- rank >= 3: the lists ------------------------------------------------------------------- */

enum { CELL_TEXT = 256, MAX_LIST_COLS = 2 + 2 * FP_RESULTS_MAX_VARIANTS + 2 };

/* A table of text being filled: rows x cols cells of CELL_TEXT chars. */
typedef struct text_table {
  int rows, cols;
  char (*text)[CELL_TEXT];
  const char **ptrs;
} text_table;

static bool text_table_init(text_table *t, int rows, int cols) {
  t->rows = rows;
  t->cols = cols;
  t->text = calloc((size_t)(rows > 0 ? rows : 1) * (size_t)cols, sizeof *t->text);
  t->ptrs = calloc((size_t)(rows > 0 ? rows : 1) * (size_t)cols, sizeof *t->ptrs);
  for (int k = 0; t->ptrs != NULL && t->text != NULL && k < rows * cols; ++k)
    t->ptrs[k] = t->text[k];
  return t->text != NULL && t->ptrs != NULL;
}

static void text_table_free(text_table *t) {
  free(t->text);
  free(t->ptrs);
}

static void print_list(FILE *f, const fp_results *r, const fp_grid *g) {
  const char *names[FP_RESULTS_MAX_VARIANTS];
  const int nv = fp_grid_variants(r, g, names, FP_RESULTS_MAX_VARIANTS);
  const char *head = fp_headline_variant(names, nv);
  const bool compute = fp_op_name_compute_bound(g->op);
  char header_text[MAX_LIST_COLS][CELL_TEXT];
  const char *header[MAX_LIST_COLS];
  int cols = 0;
  snprintf(header_text[cols++], CELL_TEXT, "shape");
  snprintf(header_text[cols++], CELL_TEXT, "params");
  for (int v = 0; v < nv; ++v)
    snprintf(header_text[cols++], CELL_TEXT, "%s us", names[v]);
  for (int v = 0; v < nv; ++v)
    if (names[v] != head)
      snprintf(header_text[cols++], CELL_TEXT, "%s/%s", names[v], head);
  snprintf(header_text[cols++], CELL_TEXT, compute ? "%s TFLOP/s" : "%s bw", head);
  snprintf(header_text[cols++], CELL_TEXT, "roof");
  for (int k = 0; k < cols; ++k)
    header[k] = header_text[k];
  text_table t;
  if (!text_table_init(&t, g->n_rows, cols)) {
    fprintf(f, "(no memory for the table)\n");
    text_table_free(&t);
    return;
  }
  for (int row = 0; row < g->n_rows; ++row) {
    const fp_grid_row *gr = &g->rows[row];
    char(*cell)[CELL_TEXT] = t.text + (size_t)row * (size_t)cols;
    int c = 0;
    fp_shape_format(&gr->shape, cell[c++], CELL_TEXT);
    snprintf(cell[c++], CELL_TEXT, "%s", gr->params[0] ? gr->params : "-");
    const fp_cell *h = fp_list_cell(r, g, gr, head);
    for (int v = 0; v < nv; ++v)
      fp_fmt_cell_time(fp_list_cell(r, g, gr, names[v]), cell[c++], CELL_TEXT);
    for (int v = 0; v < nv; ++v)
      if (names[v] != head)
        fp_fmt_ratio(fp_list_cell(r, g, gr, names[v]), h, cell[c++], CELL_TEXT);
    if (compute)
      fp_fmt_tflops(h, cell[c++], CELL_TEXT);
    else
      fp_fmt_frac(h, h != NULL ? h->bw_frac : NAN, cell[c++], CELL_TEXT);
    fp_fmt_frac(h, h != NULL ? h->roof_frac : NAN, cell[c++], CELL_TEXT);
  }
  fp_text_table_print(f, header, cols, t.ptrs, g->n_rows, 2);
  text_table_free(&t);
}

/* ---- the whole table ------------------------------------------------------------------------ */

void fp_bench_print_table(FILE *f, const fp_results *r) {
  fp_grid_set set;
  if (fp_grid_set_build(r, &set) != FP_OK) {
    fprintf(f, "(no memory for the tables: %s)\n", fp_last_error());
    return;
  }
  bool copy = isfinite(r->meta.copy_gbps) && r->meta.copy_gbps > 0;
  fprintf(f, "fuseport bench: %s backend, %s [%s], copy bandwidth %s%.1f GB/s\n", r->meta.backend,
          r->meta.device, r->meta.platform, copy ? "" : "unknown ", copy ? r->meta.copy_gbps : 0.0);
  for (int k = 0; k < r->meta.n_peaks; ++k) {
    const fp_peak *p = &r->meta.peaks[k];
    if (isfinite(p->tflops))
      fprintf(f, "peak %s: %.4g TFLOP/s (%s)\n", p->dtype, p->tflops, p->source);
    else
      fprintf(f, "peak %s: unknown (%s); roof_frac uses the bandwidth alone\n", p->dtype,
              p->source);
  }
  for (int k = 0; k < set.n; ++k) {
    const fp_grid *g = &set.grids[k];
    char title[512];
    fp_view_title(g, title, sizeof title);
    fprintf(f, "\n== %s ==\n", title);
    if (g->rank == 2)
      print_grid(f, r, g);
    else
      print_list(f, r, g);
  }
  fp_grid_set_free(&set);
  int bad = 0, na = 0;
  const fp_cell *first_na = NULL;
  for (int k = 0; k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    if (c->status == FP_CELL_UNSUPPORTED && na++ == 0)
      first_na = c;
    if (c->status != FP_CELL_FAIL && c->status != FP_CELL_ERROR)
      continue;
    if (bad++ == 0)
      fprintf(f, "\nfailed cells:\n");
    char shape[128];
    fp_shape_format(&c->shape, shape, sizeof shape);
    fprintf(f, "  %-5s %s %s %s%s%s: %s\n", c->status == FP_CELL_FAIL ? "FAIL" : "ERR", c->op,
            c->variant, shape, c->params[0] ? " " : "", c->params, c->message);
  }
  if (na > 0)
    fprintf(f, "\nn/a: %d cells the backend cannot run (not failures); the first: %s %s: %s\n", na,
            first_na->op, first_na->variant, first_na->message);
}
