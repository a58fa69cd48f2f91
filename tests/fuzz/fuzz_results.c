/* libFuzzer harness: a results file, as `compare`, `report`, `merge` and
 * `bench --resume` read it. The reader (fp_results_from_json) on the input,
 * then what the subcommands do with what it accepts: write it again (JSON
 * and CSV), lay it out as grids and lists and print bench's tables, take
 * its meta.options back as a spec and order its cells in that sweep, as
 * --resume does, and compare it with itself (fp_cmd_compare, on an
 * in-memory file).
 *
 * Properties: what the reader accepts it writes out as a file that it reads
 * back to the same text; a failed read leaves nothing allocated. */
#include "fuzz_util.h"

#include <cjson/cJSON.h>

#include "cli_bench.h"

static FILE *devnull;
static fp_bench_cli cli;

static void round_trip(fp_results *r) {
  char *text = NULL, *again = NULL;
  FZ_CHECK(fp_results_to_json(r, &text) == FP_OK);
  fp_results back;
  fp_status st = fp_results_from_json(text, "written", &back);
  if (st != FP_OK)
    fprintf(stderr, "fuzz_results: the written file is not read back: %s\n", fp_last_error());
  FZ_CHECK(st == FP_OK);
  FZ_CHECK(fp_results_to_json(&back, &again) == FP_OK);
  FZ_CHECK(strcmp(text, again) == 0);
  FZ_CHECK(back.n_cells == r->n_cells);
  free(text);
  free(again);
  fp_results_free(&back);
  char *csv = NULL;
  FZ_CHECK(fp_results_to_csv(r, &csv) == FP_OK);
  free(csv);
}

static void views(const fp_results *r) {
  fp_grid_set set;
  if (fp_grid_set_build(r, &set) != FP_OK)
    return;
  int found = 0;
  for (int g = 0; g < set.n; ++g) {
    const fp_grid *grid = &set.grids[g];
    const char *variants[FP_RESULTS_MAX_VARIANTS];
    int nv = fp_grid_variants(r, grid, variants, FP_RESULTS_MAX_VARIANTS);
    FZ_CHECK(nv >= 1 && nv <= FP_RESULTS_MAX_VARIANTS);
    char title[512];
    fp_view_title(grid, title, sizeof title);
    for (int v = 0; v < nv; ++v) {
      if (grid->rank == 2) {
        for (int i = 0; i < grid->n0; ++i)
          for (int j = 0; j < grid->n1; ++j)
            found += fp_grid_cell(r, grid, grid->dim0[i], grid->dim1[j], variants[v]) != NULL;
      } else {
        for (int k = 0; k < grid->n_rows; ++k)
          found += fp_list_cell(r, grid, &grid->rows[k], variants[v]) != NULL;
      }
    }
  }
  /* every cell is in exactly one view, unless a view has more variants
   * than it shows */
  FZ_CHECK(found <= r->n_cells);
  fp_grid_set_free(&set);
  fp_bench_print_table(devnull, r);
}

/* bench --resume FILE: the file's options as the sweep, its cells put in
 * the sweep's order (a cell outside the sweep is an error, not a crash). */
static void resume(fp_results *r) {
  char *argv[] = {"bench", "--resume", "fuzz.json", "--quiet", NULL};
  FZ_CHECK(fp_bench_parse_args(4, argv, &cli) == FP_EXIT_OK);
  if (!fp_bench_resume_spec(&cli, r, "fuzz.json"))
    return;
  FZ_CHECK(fp_bench_spec_validate(&cli.spec) == FP_OK);
  if (fz_plan_groups(&cli.spec) > FZ_MAX_GROUPS)
    return;
  fp_bench_plan plan;
  FZ_CHECK(fp_bench_plan_build(&cli.spec, &plan) == FP_OK);
  FZ_CHECK(fp_bench_cell_count(&cli.spec, &plan) >= 0);
  (void)fp_bench_sort_cells(&cli.spec, &plan, r);
  fp_bench_plan_free(&plan);
}

static void compare(const char *text, size_t len) {
  char path[64];
  int fd = fz_memfile(text, len, path, sizeof path);
  if (fd < 0)
    return;
  static const char *const formats[] = {"table", "csv", "json"};
  char *argv[] = {"compare", path, path, "--format", (char *)formats[len % 3], NULL};
  (void)fp_cmd_compare(5, argv);
  close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  devnull = fopen("/dev/null", "w");
  return devnull != NULL ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fz_string(data, size);
  fp_results r;
  if (fp_results_from_json(text, "fuzz.json", &r) != FP_OK) {
    /* nothing left behind */
    FZ_CHECK(r.n_cells == 0 && r.cells == NULL && r.meta.options == NULL && r.meta.extra == NULL);
    free(text);
    return 0;
  }
  /* what the reader promises of every cell it returns */
  for (int k = 0; k < r.n_cells; ++k) {
    const fp_cell *c = &r.cells[k];
    FZ_CHECK(c->shape.n >= 2 && c->shape.n <= FP_SHAPE_MAX_DIMS);
    for (int d = 0; d < c->shape.n; ++d)
      FZ_CHECK(c->shape.d[d] >= 1 && c->shape.d[d] <= FP_SHAPE_MAX_DIM);
    FZ_CHECK((unsigned)c->status < FP_CELL_STATUS_COUNT && c->op[0] != '\0');
  }
  round_trip(&r);
  views(&r);
  compare(text, strlen(text));
  resume(&r);
  fp_results_free(&r);
  free(text);
  return 0;
}
