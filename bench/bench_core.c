/* fuseport benchmark core: specs, the canonical sweep, timing and the run. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench_core.h"
#include "fp_device_common.h" /* FP_REDUCE_SUM */
#include "fp_git_commit.h"

/* Largest seed a JSON number (a double) holds exactly. */
#define FP_BENCH_MAX_SEED ((1ull << 53) - 1)

/* ---- specs --------------------------------------------------------------------------- */

void fp_bench_spec_init(fp_bench_spec *s) {
  memset(s, 0, sizeof *s);
  for (int k = 0; k < fp_op_count() && k < FP_BENCH_MAX_OPS; ++k)
    s->ops[s->n_ops++] = fp_op_at(k);
  snprintf(s->variants[0], sizeof s->variants[0], "fused");
  snprintf(s->variants[1], sizeof s->variants[1], "unfused");
  s->n_variants = 2;
  s->seed = FP_BENCH_DEFAULT_SEED;
  s->reps = 0;
  s->rep_ms = FP_BENCH_DEFAULT_REP_MS;
  s->warmup_ms = FP_BENCH_DEFAULT_WARMUP_MS;
  s->min_reps = FP_BENCH_MIN_REPS;
  s->max_reps = FP_BENCH_MAX_REPS;
  s->sample_elems = FP_BENCH_DEFAULT_SAMPLE_ELEMS;
  s->shard_index = 0;
  s->shard_count = 1;
}

static int op_param_index(const fp_op *op, const char *name) {
  for (int k = 0; k < op->n_params; ++k)
    if (strcmp(op->params[k].name, name) == 0)
      return k;
  return -1;
}

/* The k-th comma-separated item of list into buf; false past the end. */
static bool list_item(const char *list, int k, char *buf, size_t len) {
  const char *s = list;
  for (int i = 0; i < k; ++i) {
    s = strchr(s, ',');
    if (s == NULL)
      return false;
    ++s;
  }
  size_t n = strcspn(s, ",");
  if (n >= len)
    n = len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return true;
}

static int list_count(const char *list) {
  int n = 1;
  for (const char *s = list; *s != '\0'; ++s)
    n += *s == ',';
  return n;
}

static bool op_has_variant(const fp_op *op, const char *name) {
  return fp_op_variant(op, name) != NULL;
}

fp_status fp_bench_spec_validate(const fp_bench_spec *s) {
  if (s->n_ops < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "no op selected");
  if (s->n_variants < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "no variant selected");
  if (s->n_shapes < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "no shape selected");
  for (int k = 0; k < s->n_ops; ++k)
    for (int j = 0; j < k; ++j)
      if (s->ops[k] == s->ops[j])
        return fp_error(FP_ERR_INVALID_ARGUMENT, "op %s is selected twice", s->ops[k]->name);
  for (int v = 0; v < s->n_variants; ++v) {
    bool any = false;
    for (int k = 0; k < s->n_ops; ++k)
      any = any || op_has_variant(s->ops[k], s->variants[v]);
    if (!any)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "no selected op has a variant '%s' (the variants are fused, unfused)",
                      s->variants[v]);
    for (int j = 0; j < v; ++j)
      if (strcmp(s->variants[v], s->variants[j]) == 0)
        return fp_error(FP_ERR_INVALID_ARGUMENT, "variant %s is selected twice", s->variants[v]);
  }
  for (int k = 0; k < s->n_shapes; ++k) {
    if (s->shapes[k][0] < 1 || s->shapes[k][1] < 1)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "shape %lldx%lld: dims must be >= 1",
                      (long long)s->shapes[k][0], (long long)s->shapes[k][1]);
    for (int j = 0; j < k; ++j)
      if (s->shapes[k][0] == s->shapes[j][0] && s->shapes[k][1] == s->shapes[j][1])
        return fp_error(FP_ERR_INVALID_ARGUMENT, "shape %lldx%lld is listed twice",
                        (long long)s->shapes[k][0], (long long)s->shapes[k][1]);
  }
  for (int k = 0; k < s->n_params; ++k) {
    const char *name = s->params[k].name, *values = s->params[k].values;
    for (int j = 0; j < k; ++j)
      if (strcmp(s->params[j].name, name) == 0)
        return fp_error(FP_ERR_INVALID_ARGUMENT,
                        "--param %s is given twice (list the values: %s=A,B)", name, name);
    if (values[0] == '\0' || strstr(values, ",,") != NULL || values[strlen(values) - 1] == ',')
      return fp_error(FP_ERR_INVALID_ARGUMENT, "--param %s='%s' has an empty value", name, values);
    bool used = false;
    for (int o = 0; o < s->n_ops; ++o) {
      const fp_op *op = s->ops[o];
      int pi = op_param_index(op, name);
      if (pi < 0)
        continue;
      if (pi == op->grid_param[0] || pi == op->grid_param[1])
        return fp_error(FP_ERR_INVALID_ARGUMENT,
                        "--param %s is a shape dimension of op %s; give shapes with --shapes", name,
                        op->name);
      used = true;
      char value[256];
      for (int v = 0; list_item(values, v, value, sizeof value); ++v) {
        fp_problem p;
        fp_problem_init(&p, op);
        fp_status st = fp_problem_set(&p, name, value);
        if (st != FP_OK)
          return st;
      }
    }
    if (!used)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "no selected op has a parameter '%s'", name);
  }
  for (int o = 0; o < s->n_ops; ++o) {
    double combos = 1;
    for (int k = 0; k < s->n_params; ++k)
      if (op_param_index(s->ops[o], s->params[k].name) >= 0)
        combos *= list_count(s->params[k].values);
    if (combos > FP_BENCH_MAX_COMBOS)
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "op %s: the --param lists make %.0f combinations (at most %d)",
                      s->ops[o]->name, combos, FP_BENCH_MAX_COMBOS);
  }
  if (s->reps < 0 || (s->reps == 0 && !(s->rep_ms > 0)))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "repetitions: --reps must be >= 1 or --rep-ms > 0");
  if (!(s->warmup_ms >= 0))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "--warmup-ms must be >= 0");
  if (s->min_reps < 1 || s->max_reps < s->min_reps)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "repetition bounds [%lld, %lld] are not valid",
                    (long long)s->min_reps, (long long)s->max_reps);
  if (s->sample_elems < 0)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "sample size must be >= 0");
  if (s->flush_bytes != 0 && s->flush_bytes < (1u << 20))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "the flush buffer must be at least 1 MiB");
  if (s->seed > FP_BENCH_MAX_SEED)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "--seed must be at most 2^53-1");
  if (s->shard_count < 1 || s->shard_index < 0 || s->shard_index >= s->shard_count)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "shard %d/%d: want I/N with 0 <= I < N",
                    s->shard_index, s->shard_count);
  return FP_OK;
}

cJSON *fp_bench_spec_to_json(const fp_bench_spec *s, bool with_shard) {
  cJSON *o = cJSON_CreateObject();
  cJSON *ops = cJSON_AddArrayToObject(o, "ops");
  for (int k = 0; ops != NULL && k < s->n_ops; ++k)
    cJSON_AddItemToArray(ops, cJSON_CreateString(s->ops[k]->name));
  cJSON *variants = cJSON_AddArrayToObject(o, "variants");
  for (int k = 0; variants != NULL && k < s->n_variants; ++k)
    cJSON_AddItemToArray(variants, cJSON_CreateString(s->variants[k]));
  cJSON *shapes = cJSON_AddArrayToObject(o, "shapes");
  for (int k = 0; shapes != NULL && k < s->n_shapes; ++k) {
    double d[2] = {(double)s->shapes[k][0], (double)s->shapes[k][1]};
    cJSON_AddItemToArray(shapes, cJSON_CreateDoubleArray(d, 2));
  }
  cJSON *params = cJSON_AddArrayToObject(o, "params");
  for (int k = 0; params != NULL && k < s->n_params; ++k) {
    char text[400];
    snprintf(text, sizeof text, "%s=%s", s->params[k].name, s->params[k].values);
    cJSON_AddItemToArray(params, cJSON_CreateString(text));
  }
  cJSON_AddNumberToObject(o, "seed", (double)s->seed);
  if (s->reps > 0)
    cJSON_AddNumberToObject(o, "reps", (double)s->reps);
  else
    cJSON_AddNullToObject(o, "reps");
  cJSON_AddNumberToObject(o, "rep_ms", s->rep_ms);
  cJSON_AddNumberToObject(o, "warmup_ms", s->warmup_ms);
  cJSON_AddNumberToObject(o, "min_reps", (double)s->min_reps);
  cJSON_AddNumberToObject(o, "max_reps", (double)s->max_reps);
  cJSON_AddNumberToObject(o, "sample_elems", (double)s->sample_elems);
  if (s->flush_bytes > 0)
    cJSON_AddNumberToObject(o, "flush_bytes", (double)s->flush_bytes);
  else
    cJSON_AddNullToObject(o, "flush_bytes");
  /* only when read, so that the options of runs with the default write
   * flush (and their files from before this option) still compare equal */
  if (s->flush_read && cJSON_AddStringToObject(o, "flush", "read") == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  if (with_shard && s->shard_count > 1) {
    char shard[64];
    snprintf(shard, sizeof shard, "%d/%d", s->shard_index, s->shard_count);
    cJSON_AddStringToObject(o, "shard", shard);
  }
  /* cJSON's adders return NULL on failure; check the whole object once:
   * every array must hold what the spec holds. */
  if (o == NULL || ops == NULL || variants == NULL || shapes == NULL || params == NULL ||
      cJSON_GetArraySize(ops) != s->n_ops || cJSON_GetArraySize(variants) != s->n_variants ||
      cJSON_GetArraySize(shapes) != s->n_shapes || cJSON_GetArraySize(params) != s->n_params ||
      cJSON_GetObjectItemCaseSensitive(o, "flush_bytes") == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static fp_status json_int(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *out,
                          bool null_ok) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  if (null_ok && (it == NULL || cJSON_IsNull(it))) {
    *out = 0;
    return FP_OK;
  }
  if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
      it->valuedouble < (double)min || it->valuedouble > (double)max)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "options.%s is missing or not an integer in range",
                    key);
  *out = (int64_t)it->valuedouble;
  return FP_OK;
}

static fp_status json_double(const cJSON *o, const char *key, double *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(it))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "options.%s is missing or not a number", key);
  *out = it->valuedouble;
  return FP_OK;
}

fp_status fp_bench_spec_from_json(const cJSON *o, fp_bench_spec *s) {
  fp_bench_spec_init(s);
  s->n_ops = s->n_variants = 0;
  if (!cJSON_IsObject(o))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "meta.options is missing or not an object");
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(o, "ops");
  const cJSON *variants = cJSON_GetObjectItemCaseSensitive(o, "variants");
  const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(o, "shapes");
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(o, "params");
  if (!cJSON_IsArray(ops) || !cJSON_IsArray(variants) || !cJSON_IsArray(shapes) ||
      !cJSON_IsArray(params))
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "options: ops, variants, shapes and params must be arrays");
  const cJSON *it;
  cJSON_ArrayForEach(it, ops) {
    if (!cJSON_IsString(it) || s->n_ops >= FP_BENCH_MAX_OPS)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "options.ops holds a non-name or too many ops");
    const fp_op *op = NULL;
    if (fp_op_lookup(it->valuestring, &op) != FP_OK)
      return fp_error(FP_ERR_NOT_FOUND, "options.ops: %s", fp_last_error());
    s->ops[s->n_ops++] = op;
  }
  cJSON_ArrayForEach(it, variants) {
    if (!cJSON_IsString(it) || s->n_variants >= FP_MAX_VARIANTS)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "options.variants holds a non-name or too many");
    snprintf(s->variants[s->n_variants++], sizeof s->variants[0], "%s", it->valuestring);
  }
  cJSON_ArrayForEach(it, shapes) {
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || s->n_shapes >= FP_BENCH_MAX_SHAPES ||
        !cJSON_IsNumber(cJSON_GetArrayItem(it, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(it, 1)))
      return fp_error(FP_ERR_INVALID_ARGUMENT, "options.shapes holds a non-[dim0, dim1] entry");
    s->shapes[s->n_shapes][0] = (int64_t)cJSON_GetArrayItem(it, 0)->valuedouble;
    s->shapes[s->n_shapes][1] = (int64_t)cJSON_GetArrayItem(it, 1)->valuedouble;
    s->n_shapes++;
  }
  cJSON_ArrayForEach(it, params) {
    const char *eq = cJSON_IsString(it) ? strchr(it->valuestring, '=') : NULL;
    if (eq == NULL || s->n_params >= FP_BENCH_MAX_PARAMS ||
        (size_t)(eq - it->valuestring) >= sizeof s->params[0].name)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "options.params holds a non-NAME=VALUES entry");
    snprintf(s->params[s->n_params].name, sizeof s->params[0].name, "%.*s",
             (int)(eq - it->valuestring), it->valuestring);
    snprintf(s->params[s->n_params].values, sizeof s->params[0].values, "%s", eq + 1);
    s->n_params++;
  }
  int64_t seed = 0, reps = 0, min_reps = 0, max_reps = 0, sample = 0, flush = 0;
  fp_status st = json_int(o, "seed", 0, (int64_t)FP_BENCH_MAX_SEED, &seed, false);
  if (st == FP_OK)
    st = json_int(o, "reps", 1, INT32_MAX, &reps, true);
  if (st == FP_OK)
    st = json_int(o, "min_reps", 1, INT32_MAX, &min_reps, false);
  if (st == FP_OK)
    st = json_int(o, "max_reps", 1, INT32_MAX, &max_reps, false);
  if (st == FP_OK)
    st = json_int(o, "sample_elems", 0, INT64_MAX / 2, &sample, false);
  if (st == FP_OK)
    st = json_int(o, "flush_bytes", 1, INT64_MAX / 2, &flush, true);
  if (st == FP_OK)
    st = json_double(o, "rep_ms", &s->rep_ms);
  if (st == FP_OK)
    st = json_double(o, "warmup_ms", &s->warmup_ms);
  if (st != FP_OK)
    return st;
  s->seed = (uint64_t)seed;
  s->reps = reps;
  s->min_reps = min_reps;
  s->max_reps = max_reps;
  s->sample_elems = sample;
  s->flush_bytes = (uint64_t)flush;
  const cJSON *flush_mode = cJSON_GetObjectItemCaseSensitive(o, "flush");
  if (flush_mode == NULL) {
    s->flush_read = false;
  } else if (cJSON_IsString(flush_mode) && (strcmp(flush_mode->valuestring, "read") == 0 ||
                                            strcmp(flush_mode->valuestring, "write") == 0)) {
    s->flush_read = strcmp(flush_mode->valuestring, "read") == 0;
  } else {
    return fp_error(FP_ERR_INVALID_ARGUMENT, "options.flush must be \"read\" or \"write\"");
  }
  const cJSON *shard = cJSON_GetObjectItemCaseSensitive(o, "shard");
  if (shard != NULL && !cJSON_IsNull(shard)) {
    int i = -1, n = -1, used = 0;
    if (!cJSON_IsString(shard) || sscanf(shard->valuestring, "%d/%d%n", &i, &n, &used) != 2 ||
        shard->valuestring[used] != '\0')
      return fp_error(FP_ERR_INVALID_ARGUMENT, "options.shard is not \"I/N\"");
    s->shard_index = i;
    s->shard_count = n;
  }
  return fp_bench_spec_validate(s);
}

/* ---- the canonical sweep ---------------------------------------------------------------- */

/* "name=value ..." of the op's parameters other than the grid dimensions. */
static void group_params_text(const fp_problem *p, char *buf, size_t len) {
  char all[1024];
  fp_problem_describe(p, all, sizeof all);
  buf[0] = '\0';
  const fp_op *op = p->op;
  char *save = NULL;
  for (char *tok = strtok_r(all, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
    size_t name_len = strcspn(tok, "=");
    bool grid = false;
    for (int g = 0; g < 2; ++g) {
      const char *name = op->params[op->grid_param[g]].name;
      grid = grid || (strlen(name) == name_len && strncmp(tok, name, name_len) == 0);
    }
    if (grid)
      continue;
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", used ? " " : "", tok);
  }
}

fp_status fp_bench_plan_build(const fp_bench_spec *s, fp_bench_plan *plan) {
  memset(plan, 0, sizeof *plan);
  fp_status st = fp_bench_spec_validate(s);
  if (st != FP_OK)
    return st;
  size_t cap = 0;
  for (int o = 0; o < s->n_ops; ++o) {
    const fp_op *op = s->ops[o];
    /* the spec's params this op has, and how many values each lists */
    int which[FP_BENCH_MAX_PARAMS], counts[FP_BENCH_MAX_PARAMS], n_which = 0, combos = 1;
    for (int k = 0; k < s->n_params; ++k) {
      if (op_param_index(op, s->params[k].name) < 0)
        continue;
      which[n_which] = k;
      counts[n_which] = list_count(s->params[k].values);
      combos *= counts[n_which];
      n_which++;
    }
    for (int sh = 0; sh < s->n_shapes; ++sh) {
      for (int c = 0; c < combos; ++c) {
        if ((size_t)plan->n_groups == cap) {
          cap = cap > 0 ? 2 * cap : 256;
          fp_bench_group *groups = realloc(plan->groups, sizeof *groups * cap);
          if (groups == NULL) {
            fp_bench_plan_free(plan);
            return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the sweep's groups");
          }
          plan->groups = groups;
        }
        fp_bench_group *g = &plan->groups[plan->n_groups];
        memset(g, 0, sizeof *g);
        g->index = plan->n_groups;
        g->op_index = o;
        g->shape_index = sh;
        g->combo_index = c;
        fp_problem_init(&g->problem, op);
        /* combination c in mixed radix, the last listed param fastest */
        int rest = c;
        for (int w = n_which - 1; st == FP_OK && w >= 0; --w) {
          char value[256];
          list_item(s->params[which[w]].values, rest % counts[w], value, sizeof value);
          rest /= counts[w];
          st = fp_problem_set(&g->problem, s->params[which[w]].name, value);
        }
        if (st != FP_OK) { /* validated before: cannot happen */
          fp_bench_plan_free(plan);
          return st;
        }
        g->setup_status = fp_problem_set_grid(&g->problem, s->shapes[sh], 2);
        if (g->setup_status == FP_OK)
          g->setup_status = fp_problem_validate(&g->problem);
        if (g->setup_status != FP_OK)
          snprintf(g->setup_error, sizeof g->setup_error, "%s", fp_last_error());
        group_params_text(&g->problem, g->params, sizeof g->params);
        plan->n_groups++;
      }
    }
  }
  return FP_OK;
}

void fp_bench_plan_free(fp_bench_plan *plan) {
  free(plan->groups);
  memset(plan, 0, sizeof *plan);
}

bool fp_bench_in_shard(const fp_bench_spec *s, const fp_bench_group *g) {
  return s->shard_count <= 1 || g->index % s->shard_count == s->shard_index;
}

int fp_bench_cell_count(const fp_bench_spec *s, const fp_bench_plan *plan) {
  int n = 0;
  for (int k = 0; k < plan->n_groups; ++k) {
    const fp_bench_group *g = &plan->groups[k];
    if (!fp_bench_in_shard(s, g))
      continue;
    for (int v = 0; v < s->n_variants; ++v)
      n += op_has_variant(s->ops[g->op_index], s->variants[v]);
  }
  return n;
}

int64_t fp_bench_cell_rank(const fp_bench_spec *s, const fp_bench_plan *plan, const fp_cell *c) {
  int v = 0;
  while (v < s->n_variants && strcmp(s->variants[v], c->variant) != 0)
    ++v;
  if (v == s->n_variants)
    return -1;
  for (int k = 0; k < plan->n_groups; ++k) {
    const fp_bench_group *g = &plan->groups[k];
    if (s->shapes[g->shape_index][0] == c->dim0 && s->shapes[g->shape_index][1] == c->dim1 &&
        strcmp(s->ops[g->op_index]->name, c->op) == 0 && strcmp(g->params, c->params) == 0)
      return op_has_variant(s->ops[g->op_index], c->variant)
                 ? (int64_t)g->index * FP_MAX_VARIANTS + v
                 : -1;
  }
  return -1;
}

fp_status fp_bench_sort_cells(const fp_bench_spec *s, const fp_bench_plan *plan, fp_results *r) {
  if (r->n_cells == 0)
    return FP_OK;
  int64_t *rank = malloc(sizeof *rank * (size_t)r->n_cells);
  if (rank == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory to sort the cells");
  bool sorted = true;
  for (int k = 0; k < r->n_cells; ++k) {
    rank[k] = fp_bench_cell_rank(s, plan, &r->cells[k]);
    if (rank[k] < 0) {
      const fp_cell *c = &r->cells[k];
      free(rank);
      return fp_error(FP_ERR_INVALID_ARGUMENT, "cell %s %s %lldx%lld%s%s is not part of this sweep",
                      c->op, c->variant, (long long)c->dim0, (long long)c->dim1,
                      c->params[0] ? " " : "", c->params);
    }
    sorted = sorted && (k == 0 || rank[k] > rank[k - 1]);
  }
  fp_status st = sorted ? FP_OK : fp_results_reorder(r, rank);
  free(rank);
  return st;
}

/* ---- timing pieces --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

fp_status fp_bench_stats_of(const double *samples, int n, fp_bench_stats *out) {
  if (samples == NULL || out == NULL || n < 1)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "stats: no samples");
  double *v = malloc(sizeof *v * (size_t)n);
  if (v == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "stats: no host memory for %d samples", n);
  memcpy(v, samples, sizeof *v * (size_t)n);
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  out->min = v[0];
  out->max = v[n - 1];
  out->median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  free(v);
  return FP_OK;
}

uint64_t fp_bench_flush_bytes(uint64_t l2_cache_bytes) {
  uint64_t bytes = 2 * l2_cache_bytes;
  if (bytes < (8ull << 20))
    bytes = 8ull << 20;
  return (bytes + 4095) & ~(uint64_t)4095;
}

int64_t fp_bench_rep_count(const fp_bench_spec *s, double exec_ms, double flush_ms) {
  if (s->reps > 0)
    return s->reps;
  double per = exec_ms + flush_ms;
  double n = per > 0 ? ceil(s->rep_ms / per) : (double)s->max_reps;
  if (!(n >= (double)s->min_reps))
    n = (double)s->min_reps;
  if (n > (double)s->max_reps)
    n = (double)s->max_reps;
  return (int64_t)n;
}

uint64_t fp_bench_run_flush_bytes(const fp_bench_spec *s, const fp_device_info *dev) {
  return s->flush_bytes > 0 ? (s->flush_bytes + 4095) & ~(uint64_t)4095
                            : fp_bench_flush_bytes(dev->l2_cache_bytes);
}

int64_t fp_bench_warmup_count(const fp_bench_spec *s, double exec_ms) {
  if (!(s->warmup_ms > 0))
    return 0;
  double n = exec_ms > 0 ? ceil(s->warmup_ms / exec_ms) : (double)s->max_reps;
  if (n > (double)s->max_reps)
    n = (double)s->max_reps;
  return n < 1 ? 1 : (int64_t)n;
}

/* ---- copy bandwidth and meta ----------------------------------------------------------------- */

fp_status fp_bench_copy_bandwidth(fp_context *ctx, double *gbps) {
  *gbps = NAN;
  const fp_device_info *dev = fp_context_device(ctx);
  /* Large enough to stream from memory (4x the last-level cache, at least
   * 64 MiB), at most 1 GiB or an eighth of the device. */
  uint64_t bytes = 4 * dev->l2_cache_bytes;
  if (bytes < (64ull << 20))
    bytes = 64ull << 20;
  if (bytes > (1ull << 30))
    bytes = 1ull << 30;
  if (dev->global_mem_bytes / 8 < bytes)
    bytes = dev->global_mem_bytes / 8;
  bytes &= ~(uint64_t)4095;
  fp_buffer *src = NULL, *dst = NULL;
  fp_status st = FP_ERR_OUT_OF_MEMORY;
  /* Under a memory cap, halve until both buffers fit. */
  while (bytes >= (1ull << 20)) {
    st = fp_buffer_alloc(ctx, bytes, &src);
    if (st == FP_OK) {
      st = fp_buffer_alloc(ctx, bytes, &dst);
      if (st != FP_OK) {
        fp_buffer_free(src);
        src = NULL;
      }
    }
    if (st != FP_ERR_OUT_OF_MEMORY)
      break;
    bytes /= 2;
  }
  if (st != FP_OK)
    return st;
  fp_event *ev[2] = {NULL, NULL};
  const uint32_t pattern = 0x3F800000u; /* 1.0f */
  st = fp_buffer_fill(ctx, src, 0, bytes, &pattern, 4);
  if (st == FP_OK)
    st = fp_event_create(ctx, &ev[0]);
  if (st == FP_OK)
    st = fp_event_create(ctx, &ev[1]);
  /* warm-up: about 50 ms of copies (at least 2, at most 100), so that a GPU
   * has left its idle clocks before the timed ones */
  double first = 0;
  if (st == FP_OK)
    st = fp_event_record(ctx, ev[0]);
  if (st == FP_OK)
    st = fp_buffer_copy(ctx, dst, 0, src, 0, bytes);
  if (st == FP_OK)
    st = fp_event_record(ctx, ev[1]);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, ev[0], ev[1], &first);
  int warm = first > 0 ? (int)ceil(50.0 / first) : 100;
  warm = warm < 2 ? 2 : warm > 100 ? 100 : warm;
  for (int k = 1; st == FP_OK && k < warm; ++k)
    st = fp_buffer_copy(ctx, dst, 0, src, 0, bytes);
  double ms[9];
  int n = 0;
  for (; st == FP_OK && n < 9; ++n) {
    st = fp_event_record(ctx, ev[0]);
    if (st == FP_OK)
      st = fp_buffer_copy(ctx, dst, 0, src, 0, bytes);
    if (st == FP_OK)
      st = fp_event_record(ctx, ev[1]);
    if (st == FP_OK)
      st = fp_event_elapsed_ms(ctx, ev[0], ev[1], &ms[n]);
  }
  fp_event_destroy(ev[0]);
  fp_event_destroy(ev[1]);
  fp_buffer_free(src);
  fp_buffer_free(dst);
  if (st != FP_OK)
    return st;
  fp_bench_stats stats;
  st = fp_bench_stats_of(ms, n, &stats);
  if (st == FP_OK && stats.median > 0)
    *gbps = 2.0 * (double)bytes / (stats.median * 1e-3) / 1e9;
  return st;
}

extern char **environ; /* POSIX: the process's environment */

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

cJSON *fp_bench_environment(void) {
  static const char prefix[] = "FUSEPORT_";
  size_t count = 0;
  for (char **e = environ; e != NULL && *e != NULL; ++e)
    count += strncmp(*e, prefix, sizeof prefix - 1) == 0 && strchr(*e, '=') != NULL;
  const char **vars = calloc(count + 1, sizeof *vars);
  cJSON *env = cJSON_CreateObject();
  if (vars == NULL || env == NULL) {
    free(vars);
    cJSON_Delete(env);
    return NULL;
  }
  size_t n = 0;
  for (char **e = environ; e != NULL && *e != NULL && n < count; ++e)
    if (strncmp(*e, prefix, sizeof prefix - 1) == 0 && strchr(*e, '=') != NULL)
      vars[n++] = *e;
  /* sorted, so that two runs with the same variables compare equal whatever
   * the order of their environments */
  qsort(vars, n, sizeof *vars, compare_strings);
  for (size_t k = 0; k < n; ++k) {
    const char *eq = strchr(vars[k], '=');
    char name[256];
    const size_t len = (size_t)(eq - vars[k]);
    if (len >= sizeof name)
      continue; /* no fuseport variable is that long */
    memcpy(name, vars[k], len);
    name[len] = '\0';
    if (cJSON_AddStringToObject(env, name, eq + 1) == NULL) {
      free(vars);
      cJSON_Delete(env);
      return NULL;
    }
  }
  free(vars);
  return env;
}

fp_status fp_bench_meta_init(fp_context *ctx, const fp_bench_spec *s, fp_results *r) {
  fp_results_meta *m = &r->meta;
  const fp_device_info *dev = fp_context_device(ctx);
  snprintf(m->device, sizeof m->device, "%s", dev->name);
  snprintf(m->driver, sizeof m->driver, "%s", dev->driver_version);
  snprintf(m->backend, sizeof m->backend, "%s", fp_backend_name(fp_context_backend(ctx)));
  snprintf(m->platform, sizeof m->platform, "%s", dev->platform);
  snprintf(m->fuseport_version, sizeof m->fuseport_version, "%s", FUSEPORT_VERSION);
  snprintf(m->git_commit, sizeof m->git_commit, "%s", FUSEPORT_GIT_COMMIT);
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) == NULL ||
      strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(m->date, sizeof m->date, "unknown");
  if (gethostname(m->host, sizeof m->host) != 0)
    snprintf(m->host, sizeof m->host, "unknown");
  m->host[sizeof m->host - 1] = '\0';
  cJSON_Delete(m->options);
  cJSON_Delete(m->extra);
  m->options = fp_bench_spec_to_json(s, true);
  m->extra = cJSON_CreateObject();
  if (m->options == NULL || m->extra == NULL ||
      cJSON_AddStringToObject(m->extra, "api_version", dev->api_version) == NULL ||
      cJSON_AddNumberToObject(m->extra, "global_mem_bytes", (double)dev->global_mem_bytes) ==
          NULL ||
      cJSON_AddNumberToObject(m->extra, "l2_cache_bytes", (double)dev->l2_cache_bytes) == NULL ||
      cJSON_AddNumberToObject(m->extra, "flush_bytes", (double)fp_bench_run_flush_bytes(s, dev)) ==
          NULL ||
      cJSON_AddNumberToObject(m->extra, "compute_units", (double)dev->compute_units) == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the results' meta data");
  cJSON *env = fp_bench_environment();
  if (env == NULL || !cJSON_AddItemToObject(m->extra, "environment", env)) {
    cJSON_Delete(env);
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the results' meta data");
  }
  return FP_OK;
}

/* ---- the reference, computed once per group -------------------------------------------------- */

/* fp_check_outputs computes the float64 reference itself, through
 * p->op->reference, on every call. A group checks each variant against the
 * same inputs, so the reference is computed once and the check is handed a
 * copy of the op whose reference() copies from this cache: the accuracy gate
 * stays the one in ops/check.c. The cache is per thread. */
typedef struct ref_cache {
  const fp_op *real;
  int n_seg, n_out;
  int64_t r0[4], r1[4];
  int64_t row_elems[FP_MAX_TENSORS];
  double *data[4][FP_MAX_TENSORS];
} ref_cache;

static _Thread_local const ref_cache *active_cache;

static void cached_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                             double *const *out) {
  const ref_cache *c = active_cache;
  for (int s = 0; c != NULL && s < c->n_seg; ++s) {
    if (c->r0[s] != r0 || c->r1[s] != r1)
      continue;
    for (int k = 0; k < c->n_out; ++k)
      memcpy(out[k], c->data[s][k], sizeof(double) * (size_t)((r1 - r0) * c->row_elems[k]));
    return;
  }
  /* not a cached range: compute it (correct, only slower) */
  fp_problem q = *p;
  q.op = c->real;
  c->real->reference(&q, in, r0, r1, out);
}

static int64_t tensor_row_elems(const fp_tensor_desc *t) {
  int64_t n = 1;
  for (int d = 1; d < t->rank; ++d)
    n *= t->shape[d];
  return n;
}

static void ref_cache_free(ref_cache *c) {
  for (int s = 0; s < 4; ++s)
    for (int k = 0; k < FP_MAX_TENSORS; ++k) {
      free(c->data[s][k]);
      c->data[s][k] = NULL;
    }
}

static fp_status ref_cache_build(ref_cache *c, const fp_problem *p, const fp_io_desc *io,
                                 const fp_host_tensor *views, const fp_row_sample *rows) {
  memset(c, 0, sizeof *c);
  c->real = p->op;
  c->n_out = io->n_out;
  int64_t total = p->op->rows(p);
  for (int k = 0; k < io->n_out; ++k)
    c->row_elems[k] = tensor_row_elems(&io->out[k]);
  for (int s = 0; s < rows->n; ++s) {
    /* the same clipping as fp_check_outputs */
    int64_t r0 = rows->r0[s], r1 = rows->r1[s] < total ? rows->r1[s] : total;
    if (r0 < 0 || r0 >= r1)
      continue;
    int seg = c->n_seg++;
    c->r0[seg] = r0;
    c->r1[seg] = r1;
    for (int k = 0; k < io->n_out; ++k) {
      c->data[seg][k] = malloc(sizeof(double) * (size_t)((r1 - r0) * c->row_elems[k]));
      if (c->data[seg][k] == NULL) {
        ref_cache_free(c);
        return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for the reference");
      }
    }
    p->op->reference(p, views, r0, r1, c->data[seg]);
  }
  return FP_OK;
}

/* ---- one group ----------------------------------------------------------------------------------
 */

#define CHUNK 128 /* timed repetitions between two synchronisations */

typedef struct run_state {
  fp_context *ctx;
  const fp_bench_spec *spec;
  const fp_bench_hooks *hooks;
  fp_buffer *flush;
  uint64_t flush_bytes;
  fp_buffer *flush_sums; /* --flush read: the row sums of the flush buffer */
  fp_event *start[CHUNK], *end[CHUNK];
  double *samples;
  int64_t samples_cap;
  uint64_t baseline; /* live bytes outside any cell (flush buffer, the caller's) */
  double copy_gbps;
  uint32_t flush_pattern;
  uint64_t held_high; /* the most live bytes since the last timing started */
} run_state;

static bool stopped(const run_state *rs) {
  return rs->hooks != NULL && rs->hooks->stop != NULL && *rs->hooks->stop != 0;
}

/* Records a failure on the cell: oom for out-of-memory, else error. */
static void cell_failed(fp_cell *c, fp_status st, const char *what) {
  c->status = st == FP_ERR_OUT_OF_MEMORY ? FP_CELL_OOM : FP_CELL_ERROR;
  c->ok = false;
  snprintf(c->message, sizeof c->message, "%s: %s: %s", what, fp_status_name(st), fp_last_error());
}

/* The read flush views the buffer as rows of this many floats (64 KiB). */
#define FLUSH_ROW_FLOATS 16384

static int64_t flush_rows(uint64_t flush_bytes) {
  return (int64_t)(flush_bytes / (4 * FLUSH_ROW_FLOATS));
}

/* Evicts the cells' buffers from the last-level cache: writes the flush
 * buffer (a new pattern each time, so nothing can skip the write), or with
 * --flush read sums its rows with the backend's row-reduction primitive,
 * whose loads allocate in the cache as any kernel's do. Enqueued only. */
static fp_status flush_cache(run_state *rs) {
  if (rs->spec->flush_read) {
    const int64_t rows = flush_rows(rs->flush_bytes);
    const fp_arg args[] = {fp_arg_buf(rs->flush_sums),
                           fp_arg_buf(rs->flush),
                           fp_arg_i32(FP_REDUCE_SUM),
                           fp_arg_i64(rows),
                           fp_arg_i64(FLUSH_ROW_FLOATS),
                           fp_arg_i64(FLUSH_ROW_FLOATS),
                           fp_arg_i64(1)};
    const fp_ndrange nd = fp_ndrange_1d((uint64_t)rows, 256);
    return fp_launch(rs->ctx, FPK_prim_reduce_rows, &nd, args, 7);
  }
  rs->flush_pattern = rs->flush_pattern * 1664525u + 1013904223u;
  return fp_buffer_fill(rs->ctx, rs->flush, 0, rs->flush_bytes, &rs->flush_pattern, 4);
}

/* Times the plan: estimate, warm-up, timed repetitions. Returns FP_OK,
 * a failure, or FP_ERR_INTERNAL with *interrupted set when stopped. */
/* Times one flush and one run of the plan, apart. */
static fp_status estimate(run_state *rs, fp_plan *plan, fp_buffer **in, fp_buffer **out,
                          double *flush_ms, double *exec_ms) {
  fp_context *ctx = rs->ctx;
  fp_status st = fp_event_record(ctx, rs->start[0]);
  if (st == FP_OK)
    st = flush_cache(rs);
  if (st == FP_OK)
    st = fp_event_record(ctx, rs->end[0]);
  if (st == FP_OK)
    st = fp_plan_execute(plan, in, out);
  if (st == FP_OK)
    st = fp_event_record(ctx, rs->start[1]);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, rs->start[0], rs->end[0], flush_ms);
  if (st == FP_OK)
    st = fp_event_elapsed_ms(ctx, rs->end[0], rs->start[1], exec_ms);
  return st;
}

/* A GPU's driver goes on releasing freed memory for a while after the free
 * returns, and kernels run meanwhile are slower: on an H100 (2026-11-24,
 * bias_dropout_add fused, cuda), 65536 x 128 took 44.9 us when timed right
 * after a 32768 x 65536 cell had freed 24 GiB, against 38.2-38.9 us with a
 * pause of 50, 300 or 2000 ms before or after its own buffers were
 * allocated (so not where they were placed), and 39.0 us timed over 400 ms
 * instead of 20 (so for tens of ms); the SM and memory clocks stayed at
 * 1980 and 2619 MHz throughout. So the cell after such a free runs flushes
 * and itself for SETTLE_MS before its warm-up. Not a sleep: an idle GPU
 * drops its SM clock to 345 MHz (logged), and the grid timed with 100 ms
 * sleeps found bias_gelu 128 x 128 at 23.9 us against 4.9, about the ratio
 * of the clocks. A free of less than SETTLE_FREED_BYTES showed nothing. */
enum { SETTLE_MS = 100 };
#define SETTLE_FREED_BYTES ((uint64_t)1 << 30)

/* Folds the counters' peak (live bytes since their last reset) into
 * held_high: called before each reset and before each timing. */
static void note_held_bytes(run_state *rs) {
  fp_counters cnt;
  fp_counters_get(rs->ctx, &cnt);
  if (cnt.bytes_peak > rs->held_high)
    rs->held_high = cnt.bytes_peak;
}

static double wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static fp_status settle_after_frees(run_state *rs, fp_plan *plan, fp_buffer **in, fp_buffer **out) {
  fp_counters cnt;
  note_held_bytes(rs);
  fp_counters_get(rs->ctx, &cnt);
  fp_status st = FP_OK;
  if (fp_context_backend(rs->ctx) != FP_BACKEND_CPU &&
      rs->held_high > cnt.bytes_current + SETTLE_FREED_BYTES) {
    const double t0 = wall_ms();
    while (st == FP_OK && wall_ms() - t0 < SETTLE_MS) {
      st = flush_cache(rs);
      if (st == FP_OK)
        st = fp_plan_execute(plan, in, out);
      if (st == FP_OK)
        st = fp_finish(rs->ctx);
    }
  }
  rs->held_high = cnt.bytes_current;
  return st;
}

/* Times the plan: warm-up, then timed repetitions. Returns FP_OK or a
 * failure; *interrupted is set (and nothing timed) when stopped. */
static fp_status time_plan(run_state *rs, fp_plan *plan, fp_buffer **in, fp_buffer **out,
                           fp_bench_stats *stats, int64_t *reps, bool *interrupted) {
  fp_context *ctx = rs->ctx;
  fp_status settled = settle_after_frees(rs, plan, in, out);
  if (settled != FP_OK)
    return settled;
  /* a first estimate sizes the warm-up; a second one, after it (clocks up,
   * caches and allocators warm), sizes the repetitions */
  double flush_ms = 0, exec_ms = 0;
  fp_status st = estimate(rs, plan, in, out, &flush_ms, &exec_ms);
  int64_t warm = st == FP_OK ? fp_bench_warmup_count(rs->spec, exec_ms) : 0;
  for (int64_t k = 0; st == FP_OK && k < warm; ++k) {
    if (stopped(rs)) {
      *interrupted = true;
      (void)fp_finish(ctx);
      return FP_OK;
    }
    st = fp_plan_execute(plan, in, out);
  }
  if (st == FP_OK && warm > 0)
    st = estimate(rs, plan, in, out, &flush_ms, &exec_ms);
  if (st != FP_OK)
    return st;
  int64_t n = fp_bench_rep_count(rs->spec, exec_ms, flush_ms);
  if (st == FP_OK && n > rs->samples_cap) {
    double *s = realloc(rs->samples, sizeof *s * (size_t)n);
    if (s == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory for %lld samples", (long long)n);
    rs->samples = s;
    rs->samples_cap = n;
  }
  for (int64_t done = 0; st == FP_OK && done < n;) {
    int chunk = n - done < CHUNK ? (int)(n - done) : CHUNK;
    for (int i = 0; st == FP_OK && i < chunk; ++i) {
      if (stopped(rs)) {
        *interrupted = true;
        (void)fp_finish(ctx);
        return FP_OK;
      }
      /* the flush is enqueued before the start event: outside the time */
      st = flush_cache(rs);
      if (st == FP_OK)
        st = fp_event_record(ctx, rs->start[i]);
      if (st == FP_OK)
        st = fp_plan_execute(plan, in, out);
      if (st == FP_OK)
        st = fp_event_record(ctx, rs->end[i]);
    }
    if (st == FP_OK)
      st = fp_event_synchronize(ctx, rs->end[chunk - 1]);
    for (int i = 0; st == FP_OK && i < chunk; ++i) {
      double ms = 0;
      st = fp_event_elapsed_ms(ctx, rs->start[i], rs->end[i], &ms);
      rs->samples[done + i] = ms * 1e3;
    }
    done += chunk;
  }
  if (st != FP_OK)
    return st;
  *reps = n;
  return fp_bench_stats_of(rs->samples, (int)n, stats);
}

/* Runs one variant of a group on its (filled) inputs. */
static void run_variant(run_state *rs, const fp_bench_group *g, const fp_variant *v,
                        const fp_io_desc *io, fp_buffer **in, fp_buffer **out,
                        const fp_host_tensor *views, const fp_row_sample *rows,
                        const ref_cache *cache, fp_cell *c, bool *interrupted) {
  fp_context *ctx = rs->ctx;
  const fp_problem *p = &g->problem;
  note_held_bytes(rs);
  fp_counters_reset(ctx); /* the peak restarts from the live bytes (inputs, outputs) */
  fp_counters cnt;
  /* Build the variant's kernel families first: outside any timing. */
  fp_cost cost;
  fp_status st = fp_variant_cost(p, v, fp_context_device(ctx), &cost);
  if (st != FP_OK) {
    cell_failed(c, st, "cost model");
    return;
  }
  double compile_ms = 0;
  bool seen[FPF_COUNT] = {false};
  for (int k = 0; k < cost.n_kernel_ids; ++k) {
    fp_kernel_family fam = fp_kernel_family_of(cost.kernel_ids[k]);
    if ((unsigned)fam >= FPF_COUNT || seen[fam])
      continue;
    seen[fam] = true;
    double ms = 0;
    st = fp_kernel_prepare(ctx, cost.kernel_ids[k], &ms);
    if (st != FP_OK) {
      cell_failed(c, st, "kernel build");
      return;
    }
    compile_ms += ms;
  }
  c->compile_ms = compile_ms;
  fp_counters_get(ctx, &cnt);
  uint64_t before = cnt.bytes_current;
  fp_plan *plan = NULL;
  st = fp_plan_create(ctx, p, v, &plan);
  if (st != FP_OK) {
    cell_failed(c, st, "plan");
    return;
  }
  fp_counters_get(ctx, &cnt);
  c->footprint_bytes = (double)(cnt.bytes_current - before);
  /* the checked run, which also counts the launches */
  st = fp_io_poison_outputs(ctx, io, out);
  uint64_t launched = 0;
  if (st == FP_OK) {
    fp_counters_get(ctx, &cnt);
    launched = cnt.kernels_launched;
    st = fp_plan_execute(plan, in, out);
    fp_counters_get(ctx, &cnt);
    launched = cnt.kernels_launched - launched;
  }
  fp_accuracy acc;
  memset(&acc, 0, sizeof acc);
  if (st == FP_OK) {
    fp_op shim = *p->op;
    shim.reference = cached_reference;
    fp_problem q = *p;
    q.op = &shim;
    active_cache = cache;
    st = fp_check_outputs(ctx, &q, io, views, out, rows, &acc);
    active_cache = NULL;
  }
  if (st != FP_OK) {
    cell_failed(c, st, "run");
    fp_plan_destroy(plan);
    return;
  }
  c->kernels = (double)launched;
  c->max_abs_err = acc.max_abs_err;
  c->max_rel_err = acc.max_rel_err;
  c->rel_l2_err = acc.rel_l2_err;
  const fp_cost plan_cost = *fp_plan_cost(plan); /* a copy: the plan goes before its use */
  const fp_cost *pc = &plan_cost;
  bool count_ok = launched == (uint64_t)pc->kernels;
  fp_bench_stats stats;
  int64_t reps = 0;
  st = time_plan(rs, plan, in, out, &stats, &reps, interrupted);
  fp_counters_get(ctx, &cnt);
  fp_plan_destroy(plan);
  if (*interrupted)
    return;
  if (st != FP_OK) {
    cell_failed(c, st, "timing");
    return;
  }
  c->median_us = stats.median;
  c->min_us = stats.min;
  c->max_us = stats.max;
  c->reps = (double)reps;
  c->bytes = (double)(pc->bytes_read + pc->bytes_written);
  c->flops = pc->flops;
  if (stats.median > 0) {
    c->gbps = c->bytes / (stats.median * 1e3);
    c->gflops = c->flops / (stats.median * 1e3);
    if (rs->copy_gbps > 0)
      c->bw_frac = c->gbps / rs->copy_gbps;
  }
  c->peak_bytes = (double)(cnt.bytes_peak - rs->baseline);
  c->ok = acc.ok && count_ok;
  c->status = c->ok ? FP_CELL_OK : FP_CELL_FAIL;
  if (!acc.ok)
    snprintf(c->message, sizeof c->message,
             "%lld of %lld checked elements outside the tolerance; "
             "first: %s",
             (long long)acc.bad, (long long)acc.checked, acc.first_bad);
  else if (!count_ok)
    snprintf(c->message, sizeof c->message,
             "the backend counted %llu kernel launches, the cost model says %d",
             (unsigned long long)launched, pc->kernels);
}

/* Rounds v to `digits` significant digits: the files stay readable and a
 * value read back prints the same. NaN stays NaN. */
static double round_sig(double v, int digits) {
  if (!isfinite(v) || v == 0)
    return v;
  char buf[64];
  snprintf(buf, sizeof buf, "%.*g", digits, v);
  return strtod(buf, NULL);
}

static void tidy_cell(fp_cell *c) {
  /* times to the nanosecond, derived rates and errors to 6 digits */
  double *times[] = {&c->median_us, &c->min_us, &c->max_us};
  for (size_t k = 0; k < sizeof times / sizeof times[0]; ++k)
    if (isfinite(*times[k]))
      *times[k] = round(*times[k] * 1e3) / 1e3;
  double *rates[] = {&c->gbps,        &c->bw_frac,     &c->gflops,    &c->compile_ms,
                     &c->max_abs_err, &c->max_rel_err, &c->rel_l2_err};
  for (size_t k = 0; k < sizeof rates / sizeof rates[0]; ++k)
    *rates[k] = round_sig(*rates[k], 6);
}

/* The identity of the group's cells (op, variant, backend, params, shape). */
static void init_group_cells(const run_state *rs, const fp_bench_group *g, fp_cell *cells) {
  const fp_bench_spec *s = rs->spec;
  for (int v = 0; v < s->n_variants; ++v) {
    fp_cell *c = &cells[v];
    fp_cell_init(c);
    snprintf(c->op, sizeof c->op, "%s", s->ops[g->op_index]->name);
    snprintf(c->variant, sizeof c->variant, "%s", s->variants[v]);
    snprintf(c->backend, sizeof c->backend, "%s", fp_backend_name(fp_context_backend(rs->ctx)));
    snprintf(c->params, sizeof c->params, "%s", g->params);
    c->dim0 = s->shapes[g->shape_index][0];
    c->dim1 = s->shapes[g->shape_index][1];
  }
}

/* Runs the variants of a group that `todo` marks; fills cells[v] for those. */
static void run_group(run_state *rs, const fp_bench_group *g, const bool *todo, fp_cell *cells,
                      int *done, int total, bool *interrupted) {
  const fp_bench_spec *s = rs->spec;
  const fp_op *op = s->ops[g->op_index];
  fp_context *ctx = rs->ctx;
  init_group_cells(rs, g, cells);
  for (int v = 0; v < s->n_variants; ++v) {
    fp_cell *c = &cells[v];
    if (todo[v] && g->setup_status != FP_OK) {
      c->status = FP_CELL_ERROR;
      snprintf(c->message, sizeof c->message, "problem: %.480s", g->setup_error);
    }
  }
  if (g->setup_status != FP_OK)
    return;
  fp_io_desc io;
  op->describe(&g->problem, &io);
  fp_buffer *in[FP_MAX_TENSORS] = {NULL}, *out[FP_MAX_TENSORS] = {NULL};
  fp_status st = fp_io_alloc(ctx, &io, in, out);
  const char *what = "inputs and outputs";
  if (st == FP_OK)
    st = fp_io_fill_inputs(ctx, &io, s->seed, in);
  fp_host_tensor views[FP_MAX_TENSORS];
  fp_host_inputs_generated(&io, s->seed, views);
  fp_row_sample rows = fp_row_sample_for(&g->problem, &io, s->sample_elems);
  ref_cache cache;
  memset(&cache, 0, sizeof cache);
  if (st == FP_OK) {
    what = "reference";
    st = ref_cache_build(&cache, &g->problem, &io, views, &rows);
  }
  for (int v = 0; v < s->n_variants && !*interrupted; ++v) {
    if (!todo[v])
      continue;
    if (st != FP_OK) {
      cell_failed(&cells[v], st, what);
    } else {
      run_variant(rs, g, fp_op_variant(op, s->variants[v]), &io, in, out, views, &rows, &cache,
                  &cells[v], interrupted);
    }
    tidy_cell(&cells[v]);
    if (!*interrupted && rs->hooks != NULL && rs->hooks->on_cell != NULL)
      rs->hooks->on_cell(rs->hooks->user, &cells[v], ++*done, total);
  }
  ref_cache_free(&cache);
  fp_io_free(&io, in, out);
}

void fp_bench_count(const fp_results *r, fp_bench_summary *sum) {
  memset(sum->count, 0, sizeof sum->count);
  for (int k = 0; k < r->n_cells; ++k)
    if ((unsigned)r->cells[k].status < FP_CELL_STATUS_COUNT)
      sum->count[r->cells[k].status]++;
}

fp_status fp_bench_run(fp_context *ctx, const fp_bench_spec *s, fp_results *r,
                       const fp_bench_hooks *hooks, fp_bench_summary *sum) {
  memset(sum, 0, sizeof *sum);
  if (ctx == NULL || s == NULL || r == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_bench_run: NULL argument");
  fp_bench_plan plan;
  fp_status st = fp_bench_plan_build(s, &plan);
  if (st != FP_OK)
    return st;
  st = fp_bench_sort_cells(s, &plan, r);
  if (st != FP_OK) {
    fp_bench_plan_free(&plan);
    return st;
  }
  sum->total = fp_bench_cell_count(s, &plan);
  sum->resumed = r->n_cells;

  run_state rs;
  memset(&rs, 0, sizeof rs);
  rs.ctx = ctx;
  rs.spec = s;
  rs.hooks = hooks;
  rs.copy_gbps = r->meta.copy_gbps;
  rs.flush_bytes = fp_bench_run_flush_bytes(s, fp_context_device(ctx));
  st = fp_buffer_alloc(ctx, rs.flush_bytes, &rs.flush);
  if (st != FP_OK)
    st = fp_error(st, "the cache flush buffer (%llu bytes) does not fit: %s",
                  (unsigned long long)rs.flush_bytes, fp_last_error());
  if (st == FP_OK && s->flush_read) {
    /* the read flush reduces the pattern the buffer is filled with once */
    uint32_t pattern = 0x3f800000u; /* 1.0f */
    st = fp_buffer_alloc(ctx, 4 * (uint64_t)flush_rows(rs.flush_bytes), &rs.flush_sums);
    if (st == FP_OK)
      st = fp_buffer_fill(ctx, rs.flush, 0, rs.flush_bytes, &pattern, 4);
    if (st != FP_OK)
      st = fp_error(st, "the read flush's buffers: %s", fp_last_error());
  }
  for (int k = 0; st == FP_OK && k < CHUNK; ++k) {
    st = fp_event_create(ctx, &rs.start[k]);
    if (st == FP_OK)
      st = fp_event_create(ctx, &rs.end[k]);
  }
  fp_counters cnt;
  fp_counters_get(ctx, &cnt);
  rs.baseline = cnt.bytes_current; /* a file left by a run that died inside a group */
  bool died = r->meta.running;
  fp_cell died_key = r->meta.running_key;
  r->meta.running = false;
  int done = r->n_cells, groups_run = 0;
  int64_t last_rank = r->n_cells > 0 ? fp_bench_cell_rank(s, &plan, &r->cells[r->n_cells - 1]) : -1;
  for (int gi = 0; st == FP_OK && gi < plan.n_groups; ++gi) {
    const fp_bench_group *g = &plan.groups[gi];
    if (!fp_bench_in_shard(s, g))
      continue;
    const fp_op *op = s->ops[g->op_index];
    bool todo[FP_MAX_VARIANTS] = {false}, any = false;
    for (int v = 0; v < s->n_variants; ++v) {
      if (!op_has_variant(op, s->variants[v]))
        continue;
      fp_cell key;
      fp_cell_init(&key);
      snprintf(key.op, sizeof key.op, "%s", op->name);
      snprintf(key.variant, sizeof key.variant, "%s", s->variants[v]);
      snprintf(key.params, sizeof key.params, "%s", g->params);
      key.dim0 = s->shapes[g->shape_index][0];
      key.dim1 = s->shapes[g->shape_index][1];
      todo[v] = fp_results_find(r, &key) < 0;
      any = any || todo[v];
    }
    if (!any)
      continue;
    if (stopped(&rs)) {
      sum->interrupted = true;
      break;
    }
    fp_cell cells[FP_MAX_VARIANTS];
    bool interrupted = false;
    int done_before = done;
    fp_cell key;
    fp_cell_init(&key);
    snprintf(key.op, sizeof key.op, "%s", op->name);
    snprintf(key.params, sizeof key.params, "%s", g->params);
    key.dim0 = s->shapes[g->shape_index][0];
    key.dim1 = s->shapes[g->shape_index][1];
    if (died && strcmp(died_key.op, key.op) == 0 && strcmp(died_key.params, key.params) == 0 &&
        died_key.dim0 == key.dim0 && died_key.dim1 == key.dim1) {
      /* running it again would most likely hang or crash again */
      died = false;
      init_group_cells(&rs, g, cells);
      for (int v = 0; v < s->n_variants; ++v) {
        if (!todo[v])
          continue;
        snprintf(cells[v].message, sizeof cells[v].message,
                 "not run: an earlier run died inside this (op, shape) -- a hang stopped by a "
                 "timeout or a crash -- and --resume went on without it");
        sum->died++;
        if (hooks != NULL && hooks->on_cell != NULL)
          hooks->on_cell(hooks->user, &cells[v], ++done, sum->total);
      }
    } else {
      r->meta.running = true;
      r->meta.running_key = key;
      if (hooks != NULL && hooks->on_group_start != NULL)
        st = hooks->on_group_start(hooks->user, r);
      if (st == FP_OK)
        run_group(&rs, g, todo, cells, &done, sum->total, &interrupted);
      r->meta.running = false;
      if (st != FP_OK)
        break;
    }
    if (interrupted) { /* nothing of a half-run group is kept */
      done = done_before;
      sum->interrupted = true;
      /* it was abandoned, not died in: the file must not say it is running */
      if (hooks != NULL && hooks->on_group != NULL)
        st = hooks->on_group(hooks->user, r);
      break;
    }
    bool in_order = true;
    for (int v = 0; st == FP_OK && v < s->n_variants; ++v) {
      if (!todo[v])
        continue;
      st = fp_results_add(r, &cells[v]);
      int64_t rank = (int64_t)g->index * FP_MAX_VARIANTS + v;
      in_order = in_order && rank > last_rank;
      last_rank = rank > last_rank ? rank : last_rank;
      sum->ran++;
    }
    if (st == FP_OK && !in_order)
      st = fp_bench_sort_cells(s, &plan, r);
    fp_counters_get(ctx, &cnt);
    if (cnt.bytes_current > rs.baseline) { /* a leak of the layer or an op: report, go on */
      sum->leaked_bytes += cnt.bytes_current - rs.baseline;
      rs.baseline = cnt.bytes_current;
    }
    if (st == FP_OK && hooks != NULL && hooks->on_group != NULL)
      st = hooks->on_group(hooks->user, r);
    ++groups_run;
    if (hooks != NULL && hooks->stop_after_groups > 0 && groups_run >= hooks->stop_after_groups) {
      /* as if a signal came now: interrupted only if cells remain */
      sum->interrupted = r->n_cells < sum->total;
      break;
    }
  }
  for (int k = 0; k < CHUNK; ++k) {
    fp_event_destroy(rs.start[k]);
    fp_event_destroy(rs.end[k]);
  }
  fp_buffer_free(rs.flush_sums);
  fp_buffer_free(rs.flush);
  free(rs.samples);
  fp_bench_plan_free(&plan);
  fp_bench_count(r, sum);
  return st;
}
