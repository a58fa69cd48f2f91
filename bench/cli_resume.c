/* fuseport bench --resume: the sweep options of a results file against the
 * command line's, and its device and FUSEPORT_* environment against this
 * run's. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_bench.h"

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

void fp_bench_resume_note(const fp_results *file, bool retry_errors) {
  const fp_results_meta *m = &file->meta;
  if (!m->running || retry_errors) /* --retry-errors runs it again, and says so */
    return;
  char shape[128];
  fp_shape_format(&m->running_key.shape, shape, sizeof shape);
  char group[512];
  snprintf(group, sizeof group, "%s %s%s%s", m->running_key.op, shape,
           m->running_key.params[0] != '\0' ? " " : "", m->running_key.params);
  const int attempt = m->running_attempt > 1 ? m->running_attempt : 1;
  if (attempt < FP_BENCH_GROUP_ATTEMPTS)
    fprintf(stderr,
            "fuseport bench: resuming: a process died inside %s (killed, preempted or "
            "crashed); retrying that group once, first\n",
            group);
  else
    fprintf(stderr,
            "fuseport bench: resuming: a process died inside %s %s, on its retry too; "
            "recording its cells as error and going on (--retry-errors runs it again)\n",
            group, attempt == 2 ? "twice" : "more than twice");
}
