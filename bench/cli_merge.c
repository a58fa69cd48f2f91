/* fuseport merge: joins the result files of a sharded sweep (--shard I/N)
 * into the file the unsharded run would have written. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_bench.h"

static const char merge_usage[] =
    "usage: fuseport merge OUT.json SHARD.json... [--help]\n"
    "\n"
    "Joins the JSON results of the N shards of one sweep (fuseport bench --shard\n"
    "I/N) into OUT.json, the file the unsharded run would have written: the same\n"
    "options (without the shard), the same cells in the same canonical order.\n"
    "The shards must come from the same sweep (options equal apart from the\n"
    "shard, the same backend, device, platform, fuseport version and commit),\n"
    "together hold every shard 0..N-1 exactly once, hold no cell twice, and be\n"
    "complete (finish an interrupted shard with fuseport bench --resume first).\n"
    "\n"
    "The merged meta is shard 0's, with these differences from an unsharded run:\n"
    "date, host (the distinct hosts of the shards, comma-separated), copy_gbps and\n"
    "peak_tflops are shard 0's own; \"merged_shards\" says how many files were\n"
    "joined. Each cell keeps the bw_frac and roof_frac its own shard computed.\n"
    "Shapes of any rank (a sweep of row ops and GEMMs) merge alike.\n"
    "\n"
    "examples:\n"
    "  for i in 0 1 2 3; do fuseport bench --backend cuda --device $i --shapes seed \\\n"
    "      --shard $i/4 --out shard$i.json & done; wait\n"
    "  fuseport merge cuda.json shard0.json shard1.json shard2.json shard3.json\n"
    "\n"
    "exit status: 0 merged, 1 the files do not make one sweep or cannot be\n"
    "read/written, 2 bad usage\n";

/* Options without the shard key. */
static cJSON *unsharded(const cJSON *options) {
  cJSON *o = cJSON_Duplicate(options, 1);
  if (o != NULL)
    cJSON_DeleteItemFromObjectCaseSensitive(o, "shard");
  return o;
}

static bool same_sweep(const fp_results *a, const char *pa, const fp_results *b, const char *pb) {
  struct {
    const char *name, *x, *y;
  } fields[] = {{"backend", a->meta.backend, b->meta.backend},
                {"device", a->meta.device, b->meta.device},
                {"platform", a->meta.platform, b->meta.platform},
                {"fuseport_version", a->meta.fuseport_version, b->meta.fuseport_version},
                {"git_commit", a->meta.git_commit, b->meta.git_commit}};
  for (size_t k = 0; k < sizeof fields / sizeof fields[0]; ++k) {
    if (strcmp(fields[k].x, fields[k].y) != 0) {
      fprintf(stderr, "fuseport merge: %s has %s '%s', %s has '%s': not one sweep\n", pa,
              fields[k].name, fields[k].x, pb, fields[k].y);
      return false;
    }
  }
  /* the FUSEPORT_* variables pick builds and grids: shards run under
   * different ones are not one sweep (files from before the record: none) */
  const cJSON *ea = cJSON_GetObjectItemCaseSensitive(a->meta.extra, "environment");
  const cJSON *eb = cJSON_GetObjectItemCaseSensitive(b->meta.extra, "environment");
  if ((ea != NULL || eb != NULL) && !(ea != NULL && eb != NULL && cJSON_Compare(ea, eb, true))) {
    fprintf(stderr,
            "fuseport merge: %s and %s were run under different FUSEPORT_* variables "
            "(meta.environment): not one sweep\n",
            pa, pb);
    return false;
  }
  cJSON *oa = unsharded(a->meta.options), *ob = unsharded(b->meta.options);
  bool same = oa != NULL && ob != NULL && cJSON_Compare(oa, ob, true);
  if (!same) {
    const cJSON *e;
    cJSON_ArrayForEach(e, oa) {
      const cJSON *other = cJSON_GetObjectItemCaseSensitive(ob, e->string);
      if (other == NULL || !cJSON_Compare(e, other, true)) {
        fprintf(stderr, "fuseport merge: %s and %s differ in option %s: not one sweep\n", pa, pb,
                e->string);
        break;
      }
    }
    if (e == NULL)
      fprintf(stderr, "fuseport merge: %s and %s differ in their options: not one sweep\n", pa, pb);
  }
  cJSON_Delete(oa);
  cJSON_Delete(ob);
  return same;
}

static int merge_files(const char *out, char **paths, int n) {
  fp_results *files = calloc((size_t)n, sizeof *files);
  fp_bench_spec *specs = calloc((size_t)n, sizeof *specs);
  fp_bench_plan plan;
  memset(&plan, 0, sizeof plan);
  fp_results merged;
  fp_results_init(&merged);
  int rc = FP_EXIT_FAIL;
  int *seen = NULL;
  if (files == NULL || specs == NULL) {
    fprintf(stderr, "fuseport merge: no host memory\n");
    goto done;
  }
  for (int k = 0; k < n; ++k)
    fp_results_init(&files[k]);
  for (int k = 0; k < n; ++k) {
    if (fp_results_read_file(paths[k], &files[k]) != FP_OK) {
      fprintf(stderr, "fuseport merge: %s\n", fp_last_error());
      goto done;
    }
    if (fp_bench_spec_from_json(files[k].meta.options, &specs[k]) != FP_OK) {
      fprintf(stderr, "fuseport merge: %s: %s\n", paths[k], fp_last_error());
      goto done;
    }
    if (specs[k].shard_count <= 1) {
      fprintf(stderr, "fuseport merge: %s is not a shard (it was run without --shard)\n", paths[k]);
      goto done;
    }
    if (k > 0 && !same_sweep(&files[0], paths[0], &files[k], paths[k]))
      goto done;
  }
  int count = specs[0].shard_count;
  seen = calloc((size_t)count, sizeof *seen);
  if (seen == NULL) {
    fprintf(stderr, "fuseport merge: no host memory\n");
    goto done;
  }
  for (int k = 0; k < n; ++k) {
    int i = specs[k].shard_index;
    if (seen[i]) {
      fprintf(stderr, "fuseport merge: shard %d/%d is given twice (%s and %s)\n", i, count,
              paths[seen[i] - 1], paths[k]);
      goto done;
    }
    seen[i] = k + 1;
  }
  for (int i = 0; i < count; ++i) {
    if (!seen[i]) {
      fprintf(stderr, "fuseport merge: shard %d/%d is missing (%d files given for %d shards)\n", i,
              count, n, count);
      goto done;
    }
  }
  /* the unsharded sweep, and its meta from shard 0 */
  fp_bench_spec whole = specs[0];
  whole.shard_index = 0;
  whole.shard_count = 1;
  if (fp_bench_plan_build(&whole, &plan) != FP_OK) {
    fprintf(stderr, "fuseport merge: %s\n", fp_last_error());
    goto done;
  }
  const fp_results *first = &files[seen[0] - 1];
  merged.meta = first->meta;
  merged.meta.running = false;
  merged.meta.options = fp_bench_spec_to_json(&whole, false);
  merged.meta.extra =
      first->meta.extra != NULL ? cJSON_Duplicate(first->meta.extra, 1) : cJSON_CreateObject();
  if (merged.meta.options == NULL || merged.meta.extra == NULL) {
    fprintf(stderr, "fuseport merge: no host memory\n");
    goto done;
  }
  cJSON_DeleteItemFromObjectCaseSensitive(merged.meta.extra, "merged_shards");
  cJSON_AddNumberToObject(merged.meta.extra, "merged_shards", count);
  for (int i = 1; i < count; ++i) {
    const char *host = files[seen[i] - 1].meta.host;
    size_t len = strlen(host);
    bool listed = len == 0; /* no name: nothing to add (and strstr would find "" forever) */
    for (const char *s = merged.meta.host; !listed && (s = strstr(s, host)) != NULL; s += len)
      listed = listed || ((s == merged.meta.host || s[-1] == ',') && (s[len] == ',' || !s[len]));
    size_t used = strlen(merged.meta.host);
    if (!listed)
      snprintf(merged.meta.host + used, sizeof merged.meta.host - used, ",%s", host);
  }
  for (int k = 0; k < n; ++k) {
    for (int c = 0; c < files[k].n_cells; ++c) {
      const fp_cell *cell = &files[k].cells[c];
      int64_t rank = fp_bench_cell_rank(&whole, &plan, cell);
      char shape[128];
      fp_shape_format(&cell->shape, shape, sizeof shape);
      if (rank < 0 || !fp_bench_in_shard(&specs[k], &plan.groups[rank / FP_MAX_VARIANTS])) {
        fprintf(stderr, "fuseport merge: %s holds cell %s %s %s%s%s, which is not in its shard\n",
                paths[k], cell->op, cell->variant, shape, cell->params[0] ? " " : "", cell->params);
        goto done;
      }
      int dup = fp_results_find(&merged, cell);
      if (dup >= 0) {
        fprintf(stderr, "fuseport merge: cell %s %s %s%s%s is in more than one file\n", cell->op,
                cell->variant, shape, cell->params[0] ? " " : "", cell->params);
        goto done;
      }
      if (fp_results_add(&merged, cell) != FP_OK) {
        fprintf(stderr, "fuseport merge: %s\n", fp_last_error());
        goto done;
      }
    }
  }
  int expected = fp_bench_cell_count(&whole, &plan);
  if (merged.n_cells != expected) {
    fprintf(stderr,
            "fuseport merge: the shards hold %d of the sweep's %d cells; finish the incomplete "
            "shards with fuseport bench --resume FILE\n",
            merged.n_cells, expected);
    goto done;
  }
  char *text = NULL;
  if (fp_bench_sort_cells(&whole, &plan, &merged) != FP_OK ||
      fp_results_to_json(&merged, &text) != FP_OK ||
      fp_write_file_atomic(out, text, strlen(text)) != FP_OK) {
    fprintf(stderr, "fuseport merge: %s\n", fp_last_error());
    free(text);
    goto done;
  }
  free(text);
  fprintf(stderr, "fuseport merge: %d shards, %d cells -> %s\n", count, merged.n_cells, out);
  rc = FP_EXIT_OK;
done:
  /* merged.meta's strings were copied from shard 0; only its JSON is its own */
  fp_results_free(&merged);
  fp_bench_plan_free(&plan);
  for (int k = 0; files != NULL && k < n; ++k)
    fp_results_free(&files[k]);
  free(files);
  free(specs);
  free(seen);
  return rc;
}

int fp_cmd_merge(int argc, char **argv) {
  char **files = malloc(sizeof *files * (size_t)(argc > 0 ? argc : 1));
  if (files == NULL) {
    fprintf(stderr, "fuseport merge: no host memory\n");
    return FP_EXIT_FAIL;
  }
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(merge_usage, stdout);
      free(files);
      return FP_EXIT_OK;
    }
    if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "fuseport merge: unknown option '%s' (see fuseport merge --help)\n", argv[i]);
      free(files);
      return FP_EXIT_USAGE;
    }
    files[n++] = argv[i];
  }
  if (n < 2) {
    fprintf(stderr, "fuseport merge: want OUT.json and at least one SHARD.json (see fuseport "
                    "merge --help)\n");
    free(files);
    return FP_EXIT_USAGE;
  }
  for (int k = 1; k < n; ++k) {
    if (strcmp(files[0], files[k]) == 0) {
      fprintf(stderr, "fuseport merge: the output %s is also an input\n", files[0]);
      free(files);
      return FP_EXIT_USAGE;
    }
  }
  int rc = merge_files(files[0], files + 1, n - 1);
  free(files);
  return rc;
}
