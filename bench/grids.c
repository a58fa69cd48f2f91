/* fuseport benchmark results: the views the tables, compare and report
 * print -- rank-2 cells on (op, params) x dim0 x dim1 grids, cells of rank 3
 * and more as one list per op -- and the marks and text layouts they share. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Adds v to the set vals[0..*n) (capacity cap); false on no memory. */
static bool add_dim(int64_t **vals, int *n, int *cap, int64_t v) {
  for (int k = 0; k < *n; ++k)
    if ((*vals)[k] == v)
      return true;
  if (*n == *cap) {
    int c = *cap > 0 ? 2 * *cap : 16;
    int64_t *bigger = realloc(*vals, sizeof **vals * (size_t)c);
    if (bigger == NULL)
      return false;
    *vals = bigger;
    *cap = c;
  }
  (*vals)[(*n)++] = v;
  return true;
}

/* Adds (shape, params) to the list's rows unless there; false on no memory. */
static bool add_row(fp_grid *g, int *cap, const fp_shape *shape, const char *params) {
  for (int k = 0; k < g->n_rows; ++k)
    if (fp_shape_equal(&g->rows[k].shape, shape) && strcmp(g->rows[k].params, params) == 0)
      return true;
  if (g->n_rows == *cap) {
    int c = *cap > 0 ? 2 * *cap : 16;
    fp_grid_row *bigger = realloc(g->rows, sizeof *bigger * (size_t)c);
    if (bigger == NULL)
      return false;
    g->rows = bigger;
    *cap = c;
  }
  fp_grid_row *row = &g->rows[g->n_rows++];
  row->shape = *shape;
  snprintf(row->params, sizeof row->params, "%s", params);
  return true;
}

/* Whether cell c belongs to view g. */
static bool in_view(const fp_grid *g, const fp_cell *c) {
  if (c->shape.n != g->rank || strcmp(g->op, c->op) != 0)
    return false;
  return g->rank != 2 || strcmp(g->params, c->params) == 0;
}

fp_status fp_grid_set_build(const fp_results *r, fp_grid_set *set) {
  memset(set, 0, sizeof *set);
  int cap = 0;
  int *caps = NULL; /* three per view: dim0, dim1, rows */
  fp_status st = FP_OK;
  for (int k = 0; st == FP_OK && k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    int g = 0;
    while (g < set->n && !in_view(&set->grids[g], c))
      ++g;
    if (g == set->n) {
      if (set->n == cap) {
        int ncap = cap > 0 ? 2 * cap : 8;
        fp_grid *grids = realloc(set->grids, sizeof *grids * (size_t)ncap);
        int *c3 = realloc(caps, sizeof *c3 * 3 * (size_t)ncap);
        if (grids != NULL)
          set->grids = grids;
        if (c3 != NULL)
          caps = c3;
        if (grids == NULL || c3 == NULL) {
          st = fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the result grids");
          break;
        }
        cap = ncap;
      }
      fp_grid *n = &set->grids[set->n];
      memset(n, 0, sizeof *n);
      snprintf(n->op, sizeof n->op, "%s", c->op);
      n->rank = c->shape.n;
      if (n->rank == 2)
        snprintf(n->params, sizeof n->params, "%s", c->params);
      caps[3 * set->n] = caps[3 * set->n + 1] = caps[3 * set->n + 2] = 0;
      set->n++;
    }
    fp_grid *gr = &set->grids[g];
    bool ok = gr->rank == 2 ? add_dim(&gr->dim0, &gr->n0, &caps[3 * g], c->shape.d[0]) &&
                                  add_dim(&gr->dim1, &gr->n1, &caps[3 * g + 1], c->shape.d[1])
                            : add_row(gr, &caps[3 * g + 2], &c->shape, c->params);
    if (!ok)
      st = fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the result grids");
  }
  free(caps);
  if (st != FP_OK) {
    fp_grid_set_free(set);
    return st;
  }
  for (int g = 0; g < set->n; ++g) {
    if (set->grids[g].rank != 2)
      continue; /* a list: no axes */
    qsort(set->grids[g].dim0, (size_t)set->grids[g].n0, sizeof(int64_t), cmp_i64);
    qsort(set->grids[g].dim1, (size_t)set->grids[g].n1, sizeof(int64_t), cmp_i64);
  }
  return FP_OK;
}

void fp_grid_set_free(fp_grid_set *set) {
  for (int g = 0; g < set->n; ++g) {
    free(set->grids[g].dim0);
    free(set->grids[g].dim1);
    free(set->grids[g].rows);
  }
  free(set->grids);
  memset(set, 0, sizeof *set);
}

const fp_cell *fp_grid_cell(const fp_results *r, const fp_grid *g, int64_t dim0, int64_t dim1,
                            const char *variant) {
  for (int k = 0; k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    if (c->shape.n == 2 && c->shape.d[0] == dim0 && c->shape.d[1] == dim1 &&
        strcmp(c->variant, variant) == 0 && strcmp(c->op, g->op) == 0 &&
        strcmp(c->params, g->params) == 0)
      return c;
  }
  return NULL;
}

const fp_cell *fp_list_cell(const fp_results *r, const fp_grid *g, const fp_grid_row *row,
                            const char *variant) {
  for (int k = 0; k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    if (fp_shape_equal(&c->shape, &row->shape) && strcmp(c->variant, variant) == 0 &&
        strcmp(c->op, g->op) == 0 && strcmp(c->params, row->params) == 0)
      return c;
  }
  return NULL;
}

int fp_grid_variants(const fp_results *r, const fp_grid *g, const char **names, int max) {
  int n = 0;
  for (int k = 0; k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    if (!in_view(g, c))
      continue;
    bool seen = false;
    for (int j = 0; j < n && !seen; ++j)
      seen = strcmp(names[j], c->variant) == 0;
    if (!seen && n < max)
      names[n++] = c->variant;
  }
  return n;
}

const char *fp_cell_mark(const fp_cell *c) {
  if (c == NULL)
    return "-";
  switch (c->status) {
  case FP_CELL_OK:
    return NULL;
  case FP_CELL_FAIL:
    return "FAIL";
  case FP_CELL_OOM:
    return "OOM";
  case FP_CELL_UNSUPPORTED:
    return "n/a";
  case FP_CELL_ERROR:
  case FP_CELL_STATUS_COUNT:
    break;
  }
  return "ERR";
}

const char *fp_cell_mark_pair(const fp_cell *a, const fp_cell *b) {
  const char *ma = fp_cell_mark(a), *mb = fp_cell_mark(b);
  static const char *const priority[] = {"ERR", "FAIL", "OOM", "n/a", "-"};
  if (ma == NULL && mb == NULL)
    return NULL;
  for (size_t k = 0; k < sizeof priority / sizeof priority[0]; ++k)
    if ((ma != NULL && strcmp(ma, priority[k]) == 0) ||
        (mb != NULL && strcmp(mb, priority[k]) == 0))
      return priority[k];
  return "-";
}

bool fp_relperf(const fp_cell *fused, const fp_cell *unfused, double *pct, const char **mark) {
  *pct = NAN;
  *mark = fp_cell_mark_pair(fused, unfused);
  if (*mark == NULL && fused->median_us > 0 && isfinite(unfused->median_us)) {
    *pct = 100.0 * unfused->median_us / fused->median_us;
    return true;
  }
  if (*mark == NULL)
    *mark = "-"; /* both ok, but no usable time */
  return false;
}

void fp_grid_print(FILE *f, const fp_grid *g, const char *title,
                   void (*value)(void *user, int64_t dim0, int64_t dim1, char *buf, size_t len),
                   void *user) {
  /* Columns wide enough for the widest value or header. */
  int width = 7;
  char buf[64];
  for (int j = 0; j < g->n1; ++j) {
    int n = snprintf(buf, sizeof buf, "%lld", (long long)g->dim1[j]);
    if (n > width)
      width = n;
    for (int i = 0; i < g->n0; ++i) {
      value(user, g->dim0[i], g->dim1[j], buf, sizeof buf);
      if ((int)strlen(buf) > width)
        width = (int)strlen(buf);
    }
  }
  fprintf(f, "%s\n%-11s", title, "dim0\\dim1");
  for (int j = 0; j < g->n1; ++j)
    fprintf(f, " %*lld", width, (long long)g->dim1[j]);
  fputc('\n', f);
  for (int i = 0; i < g->n0; ++i) {
    fprintf(f, "%-11lld", (long long)g->dim0[i]);
    for (int j = 0; j < g->n1; ++j) {
      value(user, g->dim0[i], g->dim1[j], buf, sizeof buf);
      fprintf(f, " %*s", width, buf);
    }
    fputc('\n', f);
  }
}

void fp_text_table_print(FILE *f, const char *const *header, int ncols, const char *const *cells,
                         int nrows, int left) {
  enum { MAX_COLS = 32 };
  int width[MAX_COLS];
  if (ncols > MAX_COLS)
    ncols = MAX_COLS;
  for (int c = 0; c < ncols; ++c) {
    width[c] = (int)strlen(header[c]);
    for (int r = 0; r < nrows; ++r) {
      int w = (int)strlen(cells[r * ncols + c]);
      width[c] = w > width[c] ? w : width[c];
    }
  }
  for (int r = -1; r < nrows; ++r) {
    for (int c = 0; c < ncols; ++c) {
      const char *text = r < 0 ? header[c] : cells[r * ncols + c];
      const bool last = c == ncols - 1;
      if (c < left)
        fprintf(f, "%s%-*s", c ? "  " : "", last ? 0 : width[c], text);
      else
        fprintf(f, "%s%*s", c ? "  " : "", width[c], text);
    }
    fputc('\n', f);
  }
}
