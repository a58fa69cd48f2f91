/* libFuzzer harness: `fuseport bench`'s command line, one argument a line
 * (--shapes, --dim0/--dim1, --param, --shard, --variants, --reps...), parsed
 * as fp_bench_parse_args does it, then what bench does with the spec before
 * it opens a device: the sweep's plan, and the spec as the results file's
 * meta.options.
 *
 * Properties: a spec the parser accepts is one whose plan builds, whose
 * cells are told apart by the key every reader uses (op, params, shape,
 * variant), and which --resume reads back from meta.options as the same
 * spec. */
#include "fuzz_util.h"

#include <cjson/cJSON.h>

#include "cli_bench.h"

#define MAX_ARGS 64

static fp_bench_cli cli;

/* Every group of the plan has its own (op, shape, params): the key of its
 * cells in a results file, which the reader refuses to see twice. The spec's
 * shapes are distinct, and a group's combinations are consecutive. */
static void distinct_keys(const fp_bench_plan *plan) {
  int first = 0;
  for (int a = 0; a < plan->n_groups; ++a) {
    const fp_bench_group *x = &plan->groups[a];
    if (x->op_index != plan->groups[first].op_index ||
        x->shape_index != plan->groups[first].shape_index)
      first = a;
    for (int b = first; b < a; ++b)
      FZ_CHECK(strcmp(x->params, plan->groups[b].params) != 0);
  }
}

static void check_spec(const fp_bench_spec *s) {
  FZ_CHECK(fp_bench_spec_validate(s) == FP_OK);
  if (fz_plan_groups(s) <= FZ_MAX_GROUPS) {
    fp_bench_plan plan;
    FZ_CHECK(fp_bench_plan_build(s, &plan) == FP_OK);
    distinct_keys(&plan);
    FZ_CHECK(fp_bench_cell_count(s, &plan) >= 0);
    fp_bench_plan_free(&plan);
  }
  /* meta.options and back, as --resume and merge read it */
  cJSON *json = fp_bench_spec_to_json(s, true);
  FZ_CHECK(json != NULL);
  static fp_bench_spec back;
  fp_status st = fp_bench_spec_from_json(json, &back);
  if (st != FP_OK)
    fprintf(stderr, "fuzz_args: meta.options not read back: %s\n", fp_last_error());
  FZ_CHECK(st == FP_OK);
  cJSON *json_back = fp_bench_spec_to_json(&back, true);
  FZ_CHECK(json_back != NULL && cJSON_Compare(json, json_back, true));
  cJSON_Delete(json);
  cJSON_Delete(json_back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fz_string(data, size);
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  argv[argc++] = "bench";
  char *save = NULL;
  for (char *a = strtok_r(text, "\n", &save); a != NULL && argc < MAX_ARGS;
       a = strtok_r(NULL, "\n", &save))
    argv[argc++] = a;
  argv[argc] = NULL;
  int rc = fp_bench_parse_args(argc, argv, &cli);
  FZ_CHECK(rc == FP_EXIT_OK || rc == FP_EXIT_USAGE || rc == -1);
  if (rc == FP_EXIT_OK && cli.resume == NULL)
    check_spec(&cli.spec);
  free(text);
  return 0;
}
