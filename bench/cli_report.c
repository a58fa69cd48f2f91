/* fuseport report: heatmaps of a bench result file, as one self-contained
 * HTML file (inline CSS and SVG: no script, no network) or one SVG per op. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_bench.h"

static const char report_usage[] =
    "usage: fuseport report RESULTS.json (--html OUT.html | --svg DIR) [--title TEXT]\n"
    "                       [--variants BASE:CANDIDATE]\n"
    "\n"
    "Draws, for each rank-2 op (and parameter set) of a bench result file, the\n"
    "heatmap of its relative performance -- unfused median / fused median, in %\n"
    "-- on a diverging scale centred at 100% (log scale, 25%..400%: red where\n"
    "fusion loses, blue where it wins), with the value in each cell; OOM cells\n"
    "grey, FAIL/ERR cells dark, n/a (unsupported) and missing ones light; then\n"
    "the fused variant's bandwidth as a fraction of the device's copy bandwidth\n"
    "(white..green, 0..100%; the roofline fraction for a compute-bound op).\n"
    "Hovering a cell shows both times. With one variant only, its time grid is\n"
    "drawn instead. Ops of rank 3 and more (a GEMM's MxNxK) get one table each,\n"
    "a row per (shape, params): every variant's median, the other variants'\n"
    "medians over fused on the same diverging scale, fused's TFLOP/s and its\n"
    "roofline fraction (white..green).\n"
    "\n"
    "options:\n"
    "  --html FILE    one HTML file with the run's meta data and every heatmap;\n"
    "                 opens in any browser, offline\n"
    "  --svg DIR      one SVG per op in DIR (created if missing): DIR/<op>.svg\n"
    "  --title TEXT   heading of the HTML page (default: from the meta data)\n"
    "  --variants B:C the pair the relative performance compares (default\n"
    "                 unfused:fused; eager:compile for bench/torch_bench.py files)\n"
    "\n"
    "examples:\n"
    "  fuseport report cuda.json --html cuda.html\n"
    "  fuseport report cuda.json --svg figures/\n"
    "\n"
    "exit status: 0 written, 1 the file cannot be read or written, 2 bad usage\n";

/* ---- colours ------------------------------------------------------------------------ */

typedef struct rgb {
  double r, g, b;
} rgb;

static rgb mix(rgb a, rgb b, double t) {
  rgb c = {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
  return c;
}

static const rgb white = {247, 247, 247};
static const rgb red = {178, 24, 43};
static const rgb blue = {33, 102, 172};
static const rgb green = {27, 120, 55};

/* Relative performance (%) on the diverging scale: log2(pct/100) over
 * [-2, 2] (25%..400%), red below 100%, blue above. *t in [-1, 1]. */
static rgb relperf_colour(double pct, double *t) {
  double x = log2(pct / 100.0) / 2.0;
  x = x < -1 ? -1 : x > 1 ? 1 : x;
  *t = x;
  return x < 0 ? mix(white, red, -x) : mix(white, blue, x);
}

static rgb fraction_colour(double frac, double *t) {
  double x = frac < 0 ? 0 : frac > 1 ? 1 : frac;
  *t = x;
  return mix(white, green, x);
}

/* ---- SVG -------------------------------------------------------------------------------- */

static void xml_escaped(FILE *f, const char *s) {
  for (; *s != '\0'; ++s) {
    switch (*s) {
    case '&':
      fputs("&amp;", f);
      break;
    case '<':
      fputs("&lt;", f);
      break;
    case '>':
      fputs("&gt;", f);
      break;
    case '"':
      fputs("&quot;", f);
      break;
    default:
      fputc(*s, f);
    }
  }
}

enum { CELL_W = 66, CELL_H = 26, LEFT = 70, PANEL_TOP = 44, TITLE_H = 30 };

typedef enum { PANEL_RELPERF, PANEL_BW, PANEL_TIME, PANEL_ROOF } panel_kind;

static int panel_height(const fp_grid *g) { return PANEL_TOP + g->n0 * CELL_H + 56; }
static int svg_width(const fp_grid *g) {
  int w = LEFT + g->n1 * CELL_W + 20;
  return w < 460 ? 460 : w;
}

static void svg_cell(FILE *f, int x, int y, const char *fill, const char *text,
                     const char *text_fill, const char *tooltip) {
  fprintf(f, "<g><title>");
  xml_escaped(f, tooltip);
  fprintf(f,
          "</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
          "stroke=\"#ffffff\"/>",
          x, y, CELL_W, CELL_H, fill);
  fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\" text-anchor=\"middle\">%s</text></g>\n",
          x + CELL_W / 2, y + CELL_H / 2 + 4, text_fill, text);
}

static void fmt_rgb(rgb c, char *buf, size_t len) {
  snprintf(buf, len, "rgb(%d,%d,%d)", (int)lround(c.r), (int)lround(c.g), (int)lround(c.b));
}

/* The pair of variants compared: base over candidate (--variants). */
static const char *base_variant = "unfused";
static const char *cand_variant = "fused";

/* One panel (a titled grid) at vertical offset y0. */
static void svg_panel(FILE *f, const fp_results *r, const fp_grid *g, panel_kind kind,
                      const char *variant, int y0) {
  char relperf[160];
  snprintf(relperf, sizeof relperf, "relative performance: %s / %s median (>100%%: %s wins)",
           base_variant, cand_variant, cand_variant);
  const char *title = kind == PANEL_RELPERF ? relperf
                      : kind == PANEL_BW    ? "bandwidth, % of the device copy"
                      : kind == PANEL_ROOF  ? "roofline fraction"
                                            : "median time (us)";
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h\">", 4, y0 + 16);
  if (kind != PANEL_RELPERF) {
    xml_escaped(f, variant);
    fputc(' ', f);
  }
  xml_escaped(f, title);
  fprintf(f, "</text>\n");
  int top = y0 + PANEL_TOP;
  fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\">dim0 \\ dim1</text>\n", 4, top - 8);
  for (int j = 0; j < g->n1; ++j)
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"ax\">%lld</text>\n",
            LEFT + j * CELL_W + CELL_W / 2, top - 8, (long long)g->dim1[j]);
  for (int i = 0; i < g->n0; ++i) {
    int y = top + i * CELL_H;
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" class=\"ax\">%lld</text>\n", LEFT - 6,
            y + CELL_H / 2 + 4, (long long)g->dim0[i]);
    for (int j = 0; j < g->n1; ++j) {
      int x = LEFT + j * CELL_W;
      const fp_cell *fu = fp_grid_cell(r, g, g->dim0[i], g->dim1[j], cand_variant);
      const fp_cell *un = fp_grid_cell(r, g, g->dim0[i], g->dim1[j], base_variant);
      const fp_cell *c = fp_grid_cell(r, g, g->dim0[i], g->dim1[j], variant);
      char tip[512], text[64], fill[32];
      snprintf(tip, sizeof tip, "%s %lldx%lld", g->op, (long long)g->dim0[i],
               (long long)g->dim1[j]);
      const fp_cell *both[2] = {fu, un};
      for (int k = 0; k < 2; ++k) {
        const fp_cell *x2 = both[k];
        if (x2 == NULL)
          continue;
        size_t used = strlen(tip);
        if (x2->status == FP_CELL_OK || (x2->status == FP_CELL_FAIL && isfinite(x2->median_us)))
          snprintf(tip + used, sizeof tip - used, "\n%s: %.3f us (%s)", x2->variant, x2->median_us,
                   fp_cell_status_name(x2->status));
        else
          snprintf(tip + used, sizeof tip - used, "\n%s: %s %.200s", x2->variant,
                   fp_cell_status_name(x2->status), x2->message);
      }
      double value = NAN, t = 0;
      const char *mark = NULL;
      rgb colour = white;
      if (kind == PANEL_RELPERF) {
        if (fp_relperf(fu, un, &value, &mark)) {
          colour = relperf_colour(value, &t);
          snprintf(text, sizeof text, "%.0f%%", value);
        }
      } else {
        mark = fp_cell_mark(c);
        if (mark == NULL && kind == PANEL_BW && isfinite(c->bw_frac)) {
          colour = fraction_colour(c->bw_frac, &t);
          snprintf(text, sizeof text, "%.0f%%", 100 * c->bw_frac);
        } else if (mark == NULL && kind == PANEL_ROOF && isfinite(c->roof_frac)) {
          colour = fraction_colour(c->roof_frac, &t);
          snprintf(text, sizeof text, "%.0f%%", 100 * c->roof_frac);
        } else if (mark == NULL && kind == PANEL_TIME && isfinite(c->median_us)) {
          snprintf(text, sizeof text, "%.4g", c->median_us);
        } else if (mark == NULL) {
          mark = "-";
        }
      }
      if (mark != NULL) {
        bool dark = strcmp(mark, "FAIL") == 0 || strcmp(mark, "ERR") == 0;
        svg_cell(f, x, y,
                 strcmp(mark, "OOM") == 0 ? "#bdbdbd"
                 : dark                   ? "#525252"
                                          : "#f0f0f0",
                 mark, dark ? "#ffffff" : "#404040", tip);
        continue;
      }
      fmt_rgb(colour, fill, sizeof fill);
      svg_cell(f, x, y, fill, text, fabs(t) > 0.55 ? "#ffffff" : "#202020", tip);
    }
  }
  /* legend */
  int ly = top + g->n0 * CELL_H + 14;
  if (kind == PANEL_RELPERF) {
    static const double ticks[] = {25, 50, 71, 100, 141, 200, 400};
    for (int k = 0; k < 7; ++k) {
      double t;
      char fill[32];
      fmt_rgb(relperf_colour(ticks[k], &t), fill, sizeof fill);
      fprintf(f,
              "<rect x=\"%d\" y=\"%d\" width=\"40\" height=\"12\" fill=\"%s\" stroke=\"#999\"/>"
              "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"ax\">%.0f%%</text>\n",
              LEFT + k * 40, ly, fill, LEFT + k * 40 + 20, ly + 26, ticks[k]);
    }
  } else if (kind == PANEL_BW || kind == PANEL_ROOF) {
    for (int k = 0; k <= 4; ++k) {
      double t;
      char fill[32];
      fmt_rgb(fraction_colour(k / 4.0, &t), fill, sizeof fill);
      fprintf(f,
              "<rect x=\"%d\" y=\"%d\" width=\"40\" height=\"12\" fill=\"%s\" stroke=\"#999\"/>"
              "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"ax\">%d%%</text>\n",
              LEFT + k * 40, ly, fill, LEFT + k * 40 + 20, ly + 26, k * 25);
    }
  }
}

static bool has_variant(const fp_results *r, const char *v) {
  for (int k = 0; k < r->n_cells; ++k)
    if (strcmp(r->cells[k].variant, v) == 0)
      return true;
  return false;
}

/* The SVG of one grid: title, relative performance, bandwidth. */
static void svg_grid(FILE *f, const fp_results *r, const fp_grid *g) {
  bool both = has_variant(r, cand_variant) && has_variant(r, base_variant);
  const char *shown = has_variant(r, cand_variant) ? cand_variant : r->cells[0].variant;
  bool bw = isfinite(r->meta.copy_gbps) && r->meta.copy_gbps > 0;
  panel_kind first = both ? PANEL_RELPERF : PANEL_TIME;
  panel_kind second = fp_op_name_compute_bound(g->op) ? PANEL_ROOF : bw ? PANEL_BW : PANEL_TIME;
  int h = TITLE_H + panel_height(g) + (first != second ? panel_height(g) : 0);
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<style>.t{font-size:16px;font-weight:bold}.h{font-size:13px;font-weight:bold}"
          ".ax{fill:#555;font-size:11px}</style>\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
          svg_width(g), h, svg_width(g), h);
  fprintf(f, "<text x=\"4\" y=\"20\" class=\"t\">");
  xml_escaped(f, g->op);
  if (g->params[0] != '\0') {
    fputs(" (", f);
    xml_escaped(f, g->params);
    fputc(')', f);
  }
  fprintf(f, " &#8212; ");
  xml_escaped(f, r->meta.backend);
  fputs(", ", f);
  xml_escaped(f, r->meta.device);
  fprintf(f, "</text>\n");
  svg_panel(f, r, g, first, shown, TITLE_H);
  if (first != second)
    svg_panel(f, r, g, second, shown, TITLE_H + panel_height(g));
  fprintf(f, "</svg>\n");
}

/* ---- lists: ops of rank 3 and more ------------------------------------------------------- */

/* One cell of a list table: its text, its background and a tooltip. */
typedef struct lcell {
  char text[256];
  char fill[32];
  const char *ink;
  char tip[512];
} lcell;

enum { LIST_MAX_COLS = 2 + 2 * FP_RESULTS_MAX_VARIANTS + 2 };

typedef struct list_table {
  int rows, cols;
  char header[LIST_MAX_COLS][64];
  lcell *cells; /* rows x cols */
} list_table;

static void lcell_plain(lcell *c, const char *text) {
  snprintf(c->text, sizeof c->text, "%s", text);
  snprintf(c->fill, sizeof c->fill, "#ffffff");
  c->ink = "#202020";
}

/* A mark's colours, as the grids draw them. */
static void lcell_mark(lcell *c, const char *mark) {
  const bool dark = strcmp(mark, "FAIL") == 0 || strcmp(mark, "ERR") == 0;
  snprintf(c->text, sizeof c->text, "%s", mark);
  snprintf(c->fill, sizeof c->fill, "%s",
           strcmp(mark, "OOM") == 0 ? "#bdbdbd"
           : dark                   ? "#525252"
                                    : "#f0f0f0");
  c->ink = dark ? "#ffffff" : "#404040";
}

static void lcell_colour(lcell *c, rgb colour, double t) {
  fmt_rgb(colour, c->fill, sizeof c->fill);
  c->ink = fabs(t) > 0.55 ? "#ffffff" : "#202020";
}

/* The tooltip of a row: every variant's time or status. */
static void row_tip(const fp_results *r, const fp_grid *g, const fp_grid_row *row,
                    const char *const *names, int nv, char *tip, size_t len) {
  char shape[128];
  fp_shape_format(&row->shape, shape, sizeof shape);
  snprintf(tip, len, "%s %s%s%s", g->op, shape, row->params[0] ? " " : "", row->params);
  for (int v = 0; v < nv; ++v) {
    const fp_cell *c = fp_list_cell(r, g, row, names[v]);
    size_t used = strlen(tip);
    if (c == NULL)
      snprintf(tip + used, len - used, "\n%s: missing", names[v]);
    else if (c->status == FP_CELL_OK || (c->status == FP_CELL_FAIL && isfinite(c->median_us)))
      snprintf(tip + used, len - used, "\n%s: %.3f us (%s)", names[v], c->median_us,
               fp_cell_status_name(c->status));
    else
      snprintf(tip + used, len - used, "\n%s: %s %.160s", names[v], fp_cell_status_name(c->status),
               c->message);
  }
}

/* The list of g: shape, params, each variant's median, the others over the
 * candidate (coloured as relative performance), the candidate's TFLOP/s
 * (bandwidth fraction for a memory-bound op) and roofline fraction. */
static bool list_build(const fp_results *r, const fp_grid *g, list_table *t) {
  const char *names[FP_RESULTS_MAX_VARIANTS];
  const int nv = fp_grid_variants(r, g, names, FP_RESULTS_MAX_VARIANTS);
  const char *cand = names[0];
  for (int v = 0; v < nv; ++v)
    if (strcmp(names[v], cand_variant) == 0)
      cand = names[v];
  const bool compute = fp_op_name_compute_bound(g->op);
  memset(t, 0, sizeof *t);
  snprintf(t->header[t->cols++], 64, "shape");
  snprintf(t->header[t->cols++], 64, "params");
  for (int v = 0; v < nv; ++v)
    snprintf(t->header[t->cols++], 64, "%s (us)", names[v]);
  for (int v = 0; v < nv; ++v)
    if (names[v] != cand)
      snprintf(t->header[t->cols++], 64, "%s / %s", names[v], cand);
  snprintf(t->header[t->cols++], 64, compute ? "%s TFLOP/s" : "%s bandwidth", cand);
  snprintf(t->header[t->cols++], 64, "%s roofline", cand);
  t->rows = g->n_rows;
  t->cells = calloc((size_t)(t->rows > 0 ? t->rows : 1) * (size_t)t->cols, sizeof *t->cells);
  if (t->cells == NULL)
    return false;
  for (int row = 0; row < t->rows; ++row) {
    const fp_grid_row *gr = &g->rows[row];
    lcell *cells = t->cells + (size_t)row * (size_t)t->cols;
    char tip[512], text[256];
    row_tip(r, g, gr, names, nv, tip, sizeof tip);
    for (int k = 0; k < t->cols; ++k)
      snprintf(cells[k].tip, sizeof cells[k].tip, "%s", tip);
    int c = 0;
    fp_shape_format(&gr->shape, text, sizeof text);
    lcell_plain(&cells[c++], text);
    lcell_plain(&cells[c++], gr->params[0] ? gr->params : "-");
    const fp_cell *h = fp_list_cell(r, g, gr, cand);
    for (int v = 0; v < nv; ++v) {
      const fp_cell *x = fp_list_cell(r, g, gr, names[v]);
      const char *mark = fp_cell_mark(x);
      fp_fmt_cell_time(x, text, sizeof text);
      if (mark != NULL && !(x != NULL && x->status == FP_CELL_FAIL && isfinite(x->median_us)))
        lcell_mark(&cells[c++], mark);
      else
        lcell_plain(&cells[c++], text);
    }
    for (int v = 0; v < nv; ++v) {
      if (names[v] == cand)
        continue;
      const double ratio = fp_fmt_ratio(fp_list_cell(r, g, gr, names[v]), h, text, sizeof text);
      if (isnan(ratio)) {
        lcell_mark(&cells[c++], text);
      } else {
        double tt = 0;
        lcell_plain(&cells[c], text);
        lcell_colour(&cells[c++], relperf_colour(100.0 * ratio, &tt), tt);
      }
    }
    const char *mark = fp_cell_mark(h);
    const double head = h == NULL ? NAN : compute ? h->gflops / 1e3 : h->bw_frac;
    for (int k = 0; k < 2; ++k) {
      const double v = k == 0 ? head : h != NULL ? h->roof_frac : NAN;
      double tt = 0;
      if (mark != NULL) {
        lcell_mark(&cells[c++], mark);
      } else if (!isfinite(v)) {
        lcell_mark(&cells[c++], "-");
      } else if (k == 0 && compute) {
        snprintf(text, sizeof text, "%.3g", v);
        lcell_plain(&cells[c++], text);
      } else {
        snprintf(text, sizeof text, "%.0f%%", 100.0 * v);
        lcell_plain(&cells[c], text);
        lcell_colour(&cells[c++], fraction_colour(v, &tt), tt);
      }
    }
  }
  return true;
}

static void html_list(FILE *f, const fp_results *r, const fp_grid *g) {
  list_table t;
  char title[512];
  fp_view_title(g, title, sizeof title);
  fputs("<h2>", f);
  xml_escaped(f, title);
  fputs("</h2>\n", f);
  if (!list_build(r, g, &t)) {
    fputs("<p>(no memory for the table)</p>\n", f);
    free(t.cells);
    return;
  }
  fputs("<table class=\"list\">\n<tr>", f);
  for (int k = 0; k < t.cols; ++k) {
    fputs("<th>", f);
    xml_escaped(f, t.header[k]);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
  for (int row = 0; row < t.rows; ++row) {
    fputs("<tr>", f);
    for (int k = 0; k < t.cols; ++k) {
      const lcell *c = &t.cells[(size_t)row * (size_t)t.cols + (size_t)k];
      fprintf(f, "<td%s style=\"background:%s;color:%s\" title=\"", k < 2 ? " class=\"l\"" : "",
              c->fill, c->ink);
      xml_escaped(f, c->tip);
      fputs("\">", f);
      xml_escaped(f, c->text);
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
  free(t.cells);
}

/* The same table as an SVG (report --svg). */
static void svg_list(FILE *f, const fp_results *r, const fp_grid *g) {
  list_table t;
  if (!list_build(r, g, &t)) {
    free(t.cells);
    t.cells = NULL;
    t.rows = 0;
  }
  int width[LIST_MAX_COLS], x = 4;
  for (int k = 0; k < t.cols; ++k) {
    size_t n = strlen(t.header[k]);
    for (int row = 0; row < t.rows; ++row) {
      size_t m = strlen(t.cells[(size_t)row * (size_t)t.cols + (size_t)k].text);
      n = m > n ? m : n;
    }
    width[k] = 7 * (int)n + 14;
    x += width[k];
  }
  const int w = x + 4 < 460 ? 460 : x + 4, h = TITLE_H + 24 + (t.rows + 1) * CELL_H + 8;
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<style>.t{font-size:16px;font-weight:bold}.h{font-size:12px;font-weight:bold}"
          "</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
          w, h, w, h);
  char title[512];
  fp_view_title(g, title, sizeof title);
  fprintf(f, "<text x=\"4\" y=\"20\" class=\"t\">");
  xml_escaped(f, title);
  fprintf(f, " &#8212; ");
  xml_escaped(f, r->meta.backend);
  fputs(", ", f);
  xml_escaped(f, r->meta.device);
  fprintf(f, "</text>\n");
  int y = TITLE_H + 24;
  x = 4;
  for (int k = 0; k < t.cols; ++k) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h\">", x + 4, y - 6);
    xml_escaped(f, t.header[k]);
    fputs("</text>\n", f);
    x += width[k];
  }
  for (int row = 0; row < t.rows; ++row, y += CELL_H) {
    x = 4;
    for (int k = 0; k < t.cols; ++k) {
      const lcell *c = &t.cells[(size_t)row * (size_t)t.cols + (size_t)k];
      fprintf(f, "<g><title>");
      xml_escaped(f, c->tip);
      fprintf(f,
              "</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
              "stroke=\"#dddddd\"/><text x=\"%d\" y=\"%d\" fill=\"%s\">",
              x, y, width[k], CELL_H, c->fill, x + 6, y + CELL_H / 2 + 4, c->ink);
      xml_escaped(f, c->text);
      fputs("</text></g>\n", f);
      x += width[k];
    }
  }
  fprintf(f, "</svg>\n");
  free(t.cells);
}

/* ---- outputs ------------------------------------------------------------------------------ */

static int write_html(const fp_results *r, const fp_grid_set *set, const char *path,
                      const char *title) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "fuseport report: cannot write %s: %s\n", path, strerror(errno));
    return FP_EXIT_FAIL;
  }
  char heading[512];
  if (title != NULL)
    snprintf(heading, sizeof heading, "%s", title);
  else
    snprintf(heading, sizeof heading, "fuseport bench: %s on %s", r->meta.backend, r->meta.device);
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
  xml_escaped(f, heading);
  fputs("</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
        "table.meta{border-collapse:collapse;font-size:13px}"
        "table.meta td{padding:2px 12px 2px 0;vertical-align:top}"
        "section{margin:28px 0}svg{max-width:100%;height:auto}"
        "h2{font-size:16px}table.list{border-collapse:collapse;font-size:12px}"
        "table.list th{text-align:right;padding:3px 8px;border-bottom:1px solid #999}"
        "table.list td{text-align:right;padding:3px 8px;border:1px solid #fff}"
        "table.list td.l,table.list th:nth-child(-n+2){text-align:left}</style>\n"
        "</head><body>\n<h1>",
        f);
  xml_escaped(f, heading);
  fputs("</h1>\n<table class=\"meta\">\n", f);
  const struct {
    const char *k, *v;
  } rows[] = {{"device", r->meta.device},
              {"backend", r->meta.backend},
              {"platform", r->meta.platform},
              {"driver", r->meta.driver},
              {"fuseport", r->meta.fuseport_version},
              {"commit", r->meta.git_commit},
              {"date", r->meta.date},
              {"host", r->meta.host}};
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; ++k) {
    fprintf(f, "<tr><td>%s</td><td>", rows[k].k);
    xml_escaped(f, rows[k].v);
    fputs("</td></tr>\n", f);
  }
  fprintf(f, "<tr><td>copy bandwidth</td><td>");
  if (isfinite(r->meta.copy_gbps))
    fprintf(f, "%.1f GB/s", r->meta.copy_gbps);
  else
    fputs("not measured", f);
  fputs("</td></tr>\n", f);
  for (int k = 0; k < r->meta.n_peaks; ++k) {
    const fp_peak *p = &r->meta.peaks[k];
    fprintf(f, "<tr><td>peak %s</td><td>", p->dtype);
    if (isfinite(p->tflops))
      fprintf(f, "%.4g TFLOP/s (", p->tflops);
    else
      fputs("unknown (", f);
    xml_escaped(f, p->source);
    fputs(")</td></tr>\n", f);
  }
  int count[FP_CELL_STATUS_COUNT] = {0};
  for (int k = 0; k < r->n_cells; ++k)
    if ((unsigned)r->cells[k].status < FP_CELL_STATUS_COUNT)
      count[r->cells[k].status]++;
  fprintf(f,
          "<tr><td>cells</td><td>%d: %d ok, %d fail, %d oom, %d error, %d n/a</td></tr>\n"
          "</table>\n",
          r->n_cells, count[FP_CELL_OK], count[FP_CELL_FAIL], count[FP_CELL_OOM],
          count[FP_CELL_ERROR], count[FP_CELL_UNSUPPORTED]);
  fprintf(f,
          "<p>Relative performance is the %s median time over the %s one: above 100%% "
          "(blue) the %s variant is faster, below (red) slower; the scale is logarithmic "
          "and saturates at 25%% and 400%%. Hover a cell for both times. The tables of "
          "ops of rank 3 and more give each variant's median over the %s one on the same "
          "scale (there above 1, %s is faster), and the roofline fraction: max(bytes / copy "
          "bandwidth, FLOPs / the peak of the cell's type) / median. n/a: a variant the "
          "backend cannot run.</p>\n",
          base_variant, cand_variant, cand_variant, cand_variant, cand_variant);
  for (int k = 0; k < set->n; ++k) {
    fputs("<section>\n", f);
    if (set->grids[k].rank == 2)
      svg_grid(f, r, &set->grids[k]);
    else
      html_list(f, r, &set->grids[k]);
    fputs("</section>\n", f);
  }
  fputs("</body></html>\n", f);
  if (ferror(f) != 0 || fclose(f) != 0) {
    fprintf(stderr, "fuseport report: cannot write %s\n", path);
    return FP_EXIT_FAIL;
  }
  return FP_EXIT_OK;
}

static int write_svgs(const fp_results *r, const fp_grid_set *set, const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "fuseport report: cannot create %s: %s\n", dir, strerror(errno));
    return FP_EXIT_FAIL;
  }
  for (int k = 0; k < set->n; ++k) {
    const fp_grid *g = &set->grids[k];
    /* the op's name; -2, -3... for further parameter sets of the same op */
    int nth = 1;
    for (int j = 0; j < k; ++j)
      nth += strcmp(set->grids[j].op, g->op) == 0;
    char path[4096];
    if (nth == 1)
      snprintf(path, sizeof path, "%s/%s.svg", dir, g->op);
    else
      snprintf(path, sizeof path, "%s/%s-%d.svg", dir, g->op, nth);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
      fprintf(stderr, "fuseport report: cannot write %s: %s\n", path, strerror(errno));
      return FP_EXIT_FAIL;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    if (g->rank == 2)
      svg_grid(f, r, g);
    else
      svg_list(f, r, g);
    if (ferror(f) != 0 || fclose(f) != 0) {
      fprintf(stderr, "fuseport report: cannot write %s\n", path);
      return FP_EXIT_FAIL;
    }
  }
  return FP_EXIT_OK;
}

int fp_cmd_report(int argc, char **argv) {
  const char *input = NULL, *html = NULL, *svg = NULL, *title = NULL;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(report_usage, stdout);
      return FP_EXIT_OK;
    } else if (strcmp(a, "--html") == 0) {
      if ((html = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--svg") == 0) {
      if ((svg = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (strcmp(a, "--variants") == 0) {
      const char *v = fp_cli_value(argc, argv, &i);
      const char *colon = v != NULL ? strchr(v, ':') : NULL;
      static char pair[128];
      if (v == NULL || colon == NULL || colon == v || colon[1] == '\0' ||
          strlen(v) >= sizeof pair) {
        fprintf(stderr, "fuseport report: --variants wants BASE:CANDIDATE, e.g. eager:compile\n");
        return FP_EXIT_USAGE;
      }
      snprintf(pair, sizeof pair, "%s", v);
      pair[colon - v] = '\0';
      base_variant = pair;
      cand_variant = pair + (colon - v) + 1;
    } else if (strcmp(a, "--title") == 0) {
      if ((title = fp_cli_value(argc, argv, &i)) == NULL)
        return FP_EXIT_USAGE;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "fuseport report: unknown option '%s' (see fuseport report --help)\n", a);
      return FP_EXIT_USAGE;
    } else if (input == NULL) {
      input = a;
    } else {
      fprintf(stderr, "fuseport report: one result file, please; '%s' is a second\n", a);
      return FP_EXIT_USAGE;
    }
  }
  if (input == NULL || (html == NULL) == (svg == NULL)) {
    fprintf(stderr, "fuseport report: want RESULTS.json and one of --html FILE or --svg DIR "
                    "(see fuseport report --help)\n");
    return FP_EXIT_USAGE;
  }
  fp_results r;
  if (fp_results_read_file(input, &r) != FP_OK) {
    fprintf(stderr, "fuseport report: %s\n", fp_last_error());
    return FP_EXIT_FAIL;
  }
  if (r.n_cells == 0) {
    fprintf(stderr, "fuseport report: %s holds no cells\n", input);
    fp_results_free(&r);
    return FP_EXIT_FAIL;
  }
  fp_grid_set set;
  int rc = FP_EXIT_FAIL;
  if (fp_grid_set_build(&r, &set) != FP_OK) {
    fprintf(stderr, "fuseport report: %s\n", fp_last_error());
  } else {
    rc = html != NULL ? write_html(&r, &set, html, title) : write_svgs(&r, &set, svg);
    if (rc == FP_EXIT_OK)
      fprintf(stderr, "fuseport report: %d ops -> %s\n", set.n, html != NULL ? html : svg);
    fp_grid_set_free(&set);
  }
  fp_results_free(&r);
  return rc;
}
