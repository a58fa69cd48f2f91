/* fuseport benchmark core: specs (and their JSON), the canonical sweep, shards
 * and the order of cells. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_core.h"

/* Largest seed a JSON number (a double) holds exactly. */
#define FP_BENCH_MAX_SEED ((1ull << 53) - 1)

/* A quick default: 2 x 2 shapes for the row ops; well under a minute on the
 * CPU backend and on PoCL. */
const int64_t fp_bench_default_dim0[2] = {256, 1024};
const int64_t fp_bench_default_dim1[2] = {256, 2048};

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

static int op_param_index(const fp_op *op, const char *name) { return fp_op_param_index(op, name); }

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

void fp_bench_spec_all_variants(fp_bench_spec *s) {
  s->n_variants = 0;
  for (int k = 0; k < s->n_ops; ++k)
    for (int v = 0; v < s->ops[k]->n_variants; ++v) {
      const char *name = s->ops[k]->variants[v].name;
      bool seen = false;
      for (int j = 0; j < s->n_variants && !seen; ++j)
        seen = strcmp(s->variants[j], name) == 0;
      if (!seen && s->n_variants < FP_MAX_VARIANTS)
        snprintf(s->variants[s->n_variants++], sizeof s->variants[0], "%s", name);
    }
}

/* Adds shape to s unless there; false when full. */
static bool add_shape(fp_bench_spec *s, const fp_shape *shape) {
  for (int k = 0; k < s->n_shapes; ++k)
    if (fp_shape_equal(&s->shapes[k], shape))
      return true;
  if (s->n_shapes >= FP_BENCH_MAX_SHAPES)
    return false;
  s->shapes[s->n_shapes++] = *shape;
  return true;
}

/* The union of the ops' lists (seed or default), the row ops' where NULL. */
static fp_status union_shapes(fp_bench_spec *s, bool seed) {
  s->n_shapes = 0;
  for (int o = 0; o < s->n_ops; ++o) {
    const fp_op *op = s->ops[o];
    const int rank = fp_op_grid_rank(op);
    const int64_t *list = seed ? op->seed_shapes : op->default_shapes;
    const int n = seed ? op->n_seed_shapes : op->n_default_shapes;
    bool ok = true;
    if (list != NULL) {
      for (int k = 0; ok && k + rank <= n; k += rank) {
        fp_shape shape;
        memset(&shape, 0, sizeof shape);
        shape.n = rank;
        memcpy(shape.d, list + k, sizeof(int64_t) * (size_t)rank);
        ok = add_shape(s, &shape);
      }
    } else if (seed) {
      for (int i = 0; ok && i < FP_BENCH_SEED_GRID_SIDE; ++i)
        for (int j = 0; ok && j < FP_BENCH_SEED_GRID_SIDE; ++j) {
          const fp_shape shape = fp_shape_2d(128ll << i, 128ll << j);
          ok = add_shape(s, &shape);
        }
    } else {
      for (int i = 0; ok && i < 2; ++i)
        for (int j = 0; ok && j < 2; ++j) {
          const fp_shape shape = fp_shape_2d(fp_bench_default_dim0[i], fp_bench_default_dim1[j]);
          ok = add_shape(s, &shape);
        }
    }
    if (!ok)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "the ops' %s shapes are more than %d",
                      seed ? "seed" : "default", FP_BENCH_MAX_SHAPES);
  }
  return FP_OK;
}

fp_status fp_bench_spec_seed_shapes(fp_bench_spec *s) { return union_shapes(s, true); }

fp_status fp_bench_spec_default_shapes(fp_bench_spec *s) { return union_shapes(s, false); }

int fp_bench_op_shape_count(const fp_bench_spec *s, const fp_op *op) {
  int n = 0;
  for (int k = 0; k < s->n_shapes; ++k)
    n += fp_op_takes_rank(op, s->shapes[k].n);
  return n;
}

/* Whether parameter index pi is one of the op's grid dimensions that every
 * shape gives (not one a shorter shape leaves to --param). */
static bool is_grid_param(const fp_op *op, int pi) {
  const int given = op->n_grid_min > 0 ? op->n_grid_min : fp_op_grid_rank(op);
  for (int g = 0; g < given; ++g)
    if (fp_op_grid_param(op, given, g) == pi)
      return true;
  return false;
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
                      "no selected op has a variant '%s' (the variants are fused, unfused, "
                      "vendor for the matmul and conv families, memeff for attention)",
                      s->variants[v]);
    for (int j = 0; j < v; ++j)
      if (strcmp(s->variants[v], s->variants[j]) == 0)
        return fp_error(FP_ERR_INVALID_ARGUMENT, "variant %s is selected twice", s->variants[v]);
  }
  for (int k = 0; k < s->n_shapes; ++k) {
    const fp_shape *sh = &s->shapes[k];
    char text[128];
    fp_shape_format(sh, text, sizeof text);
    if (sh->n < 2 || sh->n > FP_SHAPE_MAX_DIMS)
      return fp_error(FP_ERR_INVALID_ARGUMENT, "shape %s: want 2 to %d dimensions, not %d", text,
                      FP_SHAPE_MAX_DIMS, sh->n);
    for (int d = 0; d < sh->n; ++d)
      if (sh->d[d] < 1 || sh->d[d] > FP_SHAPE_MAX_DIM)
        return fp_error(FP_ERR_INVALID_ARGUMENT, "shape %s: dims must be in [1, 2^53]", text);
    for (int j = 0; j < k; ++j)
      if (fp_shape_equal(sh, &s->shapes[j]))
        return fp_error(FP_ERR_INVALID_ARGUMENT, "shape %s is listed twice", text);
  }
  for (int k = 0; k < s->n_ops; ++k) {
    const fp_op *op = s->ops[k];
    if (fp_bench_op_shape_count(s, op) > 0)
      continue;
    char pattern[64] = ""; /* "MxNxK": the op's grid parameters */
    for (int g = 0; g < fp_op_grid_rank(op); ++g) {
      size_t used = strlen(pattern);
      snprintf(pattern + used, sizeof pattern - used, "%s%s", g ? "x" : "",
               op->params[op->grid_param[g]].name);
    }
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "op %s takes shapes of %d dimensions (%s) and the sweep lists none", op->name,
                    fp_op_grid_rank(op), pattern);
  }
  for (int k = 0; k < s->n_params; ++k) {
    const char *name = s->params[k].name, *values = s->params[k].values;
    for (int j = 0; j < k; ++j) {
      if (strcmp(s->params[j].name, name) == 0)
        return fp_error(FP_ERR_INVALID_ARGUMENT,
                        "--param %s is given twice (list the values: %s=A,B)", name, name);
      /* names match an op's parameter regardless of case: two spellings of
       * one parameter would sweep it twice */
      for (int o = 0; o < s->n_ops; ++o) {
        const int pi = op_param_index(s->ops[o], name);
        if (pi >= 0 && pi == op_param_index(s->ops[o], s->params[j].name))
          return fp_error(FP_ERR_INVALID_ARGUMENT,
                          "--param %s and --param %s set the same parameter %s of op %s (list "
                          "the values once: %s=A,B)",
                          s->params[j].name, name, s->ops[o]->params[pi].name, s->ops[o]->name,
                          s->ops[o]->params[pi].name);
      }
    }
    if (values[0] == '\0' || strstr(values, ",,") != NULL || values[strlen(values) - 1] == ',')
      return fp_error(FP_ERR_INVALID_ARGUMENT, "--param %s='%s' has an empty value", name, values);
    bool used = false;
    for (int o = 0; o < s->n_ops; ++o) {
      const fp_op *op = s->ops[o];
      int pi = op_param_index(op, name);
      if (pi < 0)
        continue;
      if (is_grid_param(op, pi))
        return fp_error(FP_ERR_INVALID_ARGUMENT,
                        "--param %s is a shape dimension of op %s; give shapes with --shapes", name,
                        op->name);
      /* nor a trailing dimension that some shape gives: the shape's value
       * wins, and every value of the list would make the same group */
      for (int sh = 0; sh < s->n_shapes; ++sh) {
        const int n = s->shapes[sh].n;
        for (int g = 0; fp_op_takes_rank(op, n) && g < n; ++g)
          if (fp_op_grid_param(op, n, g) == pi) {
            char text[128];
            fp_shape_format(&s->shapes[sh], text, sizeof text);
            return fp_error(FP_ERR_INVALID_ARGUMENT,
                            "--param %s is a dimension of op %s's shape %s; give it either in "
                            "every shape or with --param",
                            name, op->name, text);
          }
      }
      used = true;
      /* Each value once: two that parse alike (training=true,1; p=0.1,0.10)
       * make groups with the same cell keys, of which a run keeps one and
       * then never completes. */
      double seen[sizeof s->params[0].values / 2 + 1];
      char value[256];
      for (int v = 0; list_item(values, v, value, sizeof value); ++v) {
        fp_problem p;
        fp_problem_init(&p, op);
        fp_status st = fp_problem_set(&p, name, value);
        if (st != FP_OK)
          return st;
        for (int j = 0; j < v; ++j)
          if (seen[j] == p.v[pi]) {
            char first[256];
            list_item(values, j, first, sizeof first);
            return fp_error(FP_ERR_INVALID_ARGUMENT,
                            "--param %s=%s: '%s' and '%s' are the same value of op %s", name,
                            values, first, value, op->name);
          }
        seen[v] = p.v[pi];
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
  for (int k = 0; shapes != NULL && k < s->n_shapes; ++k)
    cJSON_AddItemToArray(shapes, fp_shape_to_json(&s->shapes[k]));
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

/* sscanf's %d is undefined past INT_MAX (glibc wraps: "4294967296/3" read
 * as shard 0/3), so each number is strtol's, digits only, in range. */
bool fp_bench_parse_shard(const char *text, int *index, int *count) {
  if (!isdigit((unsigned char)text[0]))
    return false;
  char *end = NULL;
  errno = 0;
  const long i = strtol(text, &end, 10);
  if (errno != 0 || *end != '/' || !isdigit((unsigned char)end[1]))
    return false;
  const long n = strtol(end + 1, &end, 10);
  if (errno != 0 || *end != '\0' || n > INT_MAX || i >= n)
    return false;
  *index = (int)i;
  *count = (int)n;
  return true;
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
    if (s->n_shapes >= FP_BENCH_MAX_SHAPES || !fp_shape_from_json(it, &s->shapes[s->n_shapes]))
      return fp_error(FP_ERR_INVALID_ARGUMENT,
                      "options.shapes holds an entry that is not [d0, d1, ...] (2 to %d integer "
                      "dims in [1, 2^53]), or more than %d",
                      FP_SHAPE_MAX_DIMS, FP_BENCH_MAX_SHAPES);
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
    int i = -1, n = -1;
    if (!cJSON_IsString(shard) || !fp_bench_parse_shard(shard->valuestring, &i, &n))
      return fp_error(FP_ERR_INVALID_ARGUMENT, "options.shard is not \"I/N\" with 0 <= I < N");
    s->shard_index = i;
    s->shard_count = n;
  }
  return fp_bench_spec_validate(s);
}

/* ---- the canonical sweep ---------------------------------------------------------------- */

/* "name=value ..." of the op's parameters other than the shape's `dims`
 * grid dimensions. */
static void group_params_text(const fp_problem *p, int dims, char *buf, size_t len) {
  char all[1024];
  fp_problem_describe(p, all, sizeof all);
  buf[0] = '\0';
  const fp_op *op = p->op;
  char *save = NULL;
  for (char *tok = strtok_r(all, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
    size_t name_len = strcspn(tok, "=");
    bool grid = false;
    for (int g = 0; g < dims; ++g) {
      const char *name = op->params[fp_op_grid_param(op, dims, g)].name;
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
      if (!fp_op_takes_rank(op, s->shapes[sh].n))
        continue; /* the op runs the shapes of its rank */
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
        g->setup_status = fp_problem_set_grid(&g->problem, s->shapes[sh].d, s->shapes[sh].n);
        if (g->setup_status == FP_OK)
          g->setup_status = fp_problem_validate(&g->problem);
        if (g->setup_status != FP_OK)
          snprintf(g->setup_error, sizeof g->setup_error, "%s", fp_last_error());
        group_params_text(&g->problem, s->shapes[sh].n, g->params, sizeof g->params);
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
    if (fp_shape_equal(&s->shapes[g->shape_index], &c->shape) &&
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
      char shape[128];
      fp_shape_format(&c->shape, shape, sizeof shape);
      free(rank);
      return fp_error(FP_ERR_INVALID_ARGUMENT, "cell %s %s %s%s%s is not part of this sweep", c->op,
                      c->variant, shape, c->params[0] ? " " : "", c->params);
    }
    sorted = sorted && (k == 0 || rank[k] > rank[k - 1]);
  }
  fp_status st = sorted ? FP_OK : fp_results_reorder(r, rank);
  free(rank);
  return st;
}
