/* fuseport benchmark results: cells, JSON/CSV files, atomic writes, grids. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "results.h"

static const char *const status_names[FP_CELL_STATUS_COUNT] = {"ok", "fail", "oom", "error",
                                                               "unsupported"};

const char *fp_cell_status_name(fp_cell_status s) {
  return (unsigned)s < FP_CELL_STATUS_COUNT ? status_names[s] : "unknown";
}

bool fp_cell_status_parse(const char *name, fp_cell_status *out) {
  for (int k = 0; name != NULL && k < FP_CELL_STATUS_COUNT; ++k) {
    if (strcmp(name, status_names[k]) == 0) {
      *out = (fp_cell_status)k;
      return true;
    }
  }
  return false;
}

void fp_shape_format(const fp_shape *s, char *buf, size_t len) {
  if (len == 0)
    return;
  buf[0] = '\0';
  for (int k = 0; k < s->n; ++k) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%lld", k ? "x" : "", (long long)s->d[k]);
  }
}

bool fp_shape_equal(const fp_shape *a, const fp_shape *b) {
  if (a->n != b->n)
    return false;
  for (int k = 0; k < a->n; ++k)
    if (a->d[k] != b->d[k])
      return false;
  return true;
}

fp_shape fp_shape_2d(int64_t dim0, int64_t dim1) {
  fp_shape s;
  memset(&s, 0, sizeof s);
  s.n = 2;
  s.d[0] = dim0;
  s.d[1] = dim1;
  return s;
}

int fp_shape_compare(const fp_shape *a, const fp_shape *b) {
  if (a->n != b->n)
    return a->n < b->n ? -1 : 1;
  for (int k = 0; k < a->n; ++k)
    if (a->d[k] != b->d[k])
      return a->d[k] < b->d[k] ? -1 : 1;
  return 0;
}

cJSON *fp_shape_to_json(const fp_shape *s) {
  double d[FP_SHAPE_MAX_DIMS];
  int n = s->n < 0 ? 0 : s->n > FP_SHAPE_MAX_DIMS ? FP_SHAPE_MAX_DIMS : s->n;
  for (int k = 0; k < n; ++k)
    d[k] = (double)s->d[k];
  return cJSON_CreateDoubleArray(d, n);
}

bool fp_shape_from_json(const cJSON *a, fp_shape *s) {
  memset(s, 0, sizeof *s);
  int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
  if (n < 2 || n > FP_SHAPE_MAX_DIMS)
    return false;
  for (int k = 0; k < n; ++k) {
    const cJSON *d = cJSON_GetArrayItem(a, k);
    /* integers >= 1 that a double holds exactly */
    if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble) || d->valuedouble < 1 ||
        d->valuedouble > (double)FP_SHAPE_MAX_DIM)
      return false;
    s->d[k] = (int64_t)d->valuedouble;
  }
  s->n = n;
  return true;
}

void fp_cell_init(fp_cell *c) {
  memset(c, 0, sizeof *c);
  c->status = FP_CELL_ERROR;
  c->median_us = c->min_us = c->max_us = NAN;
  c->reps = c->kernels = c->library_calls = c->bytes = c->gbps = c->bw_frac = c->roof_frac = NAN;
  c->flops = c->gflops = c->footprint_bytes = c->peak_bytes = c->compile_ms = NAN;
  c->max_abs_err = c->max_rel_err = c->rel_l2_err = NAN;
  c->ok = false;
}

bool fp_cell_same_key(const fp_cell *a, const fp_cell *b) {
  return fp_shape_equal(&a->shape, &b->shape) && strcmp(a->op, b->op) == 0 &&
         strcmp(a->variant, b->variant) == 0 && strcmp(a->params, b->params) == 0;
}

/* ---- the collection ---------------------------------------------------------------- */

void fp_results_init(fp_results *r) {
  memset(r, 0, sizeof *r);
  r->meta.copy_gbps = NAN;
}

double fp_results_peak(const fp_results_meta *m, const char *dtype) {
  for (int k = 0; k < m->n_peaks; ++k)
    if (strcmp(m->peaks[k].dtype, dtype) == 0)
      return m->peaks[k].tflops;
  return NAN;
}

fp_status fp_results_set_peak(fp_results_meta *m, const char *dtype, double tflops,
                              const char *source) {
  int k = 0;
  while (k < m->n_peaks && strcmp(m->peaks[k].dtype, dtype) != 0)
    ++k;
  if (k == FP_RESULTS_MAX_PEAKS)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "results: more than %d peak_tflops entries",
                    FP_RESULTS_MAX_PEAKS);
  if (strlen(dtype) >= sizeof m->peaks[k].dtype)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "results: '%s' is not an element type", dtype);
  fp_peak *p = &m->peaks[k];
  snprintf(p->dtype, sizeof p->dtype, "%s", dtype);
  p->tflops = tflops;
  snprintf(p->source, sizeof p->source, "%s", source != NULL ? source : "");
  if (k == m->n_peaks)
    m->n_peaks++;
  m->has_peaks = true;
  return FP_OK;
}

void fp_results_free(fp_results *r) {
  if (r == NULL)
    return;
  for (int k = 0; k < r->n_cells; ++k)
    cJSON_free(r->cell_json[k]);
  free(r->cell_json);
  free(r->cells);
  cJSON_Delete(r->meta.options);
  cJSON_Delete(r->meta.extra);
  fp_results_init(r);
}

fp_status fp_results_add(fp_results *r, const fp_cell *c) {
  if (r->n_cells == r->cap_cells) {
    int cap = r->cap_cells > 0 ? 2 * r->cap_cells : 64;
    fp_cell *cells = realloc(r->cells, sizeof *cells * (size_t)cap);
    if (cells == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "results: no host memory for %d cells", cap);
    r->cells = cells;
    char **json = realloc(r->cell_json, sizeof *json * (size_t)cap);
    if (json == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "results: no host memory for %d cells", cap);
    r->cell_json = json;
    r->cap_cells = cap;
  }
  r->cells[r->n_cells] = *c;
  r->cell_json[r->n_cells] = NULL;
  r->n_cells++;
  return FP_OK;
}

int fp_results_remove_status(fp_results *r, fp_cell_status s) {
  int kept = 0;
  for (int k = 0; k < r->n_cells; ++k) {
    if (r->cells[k].status == s) {
      cJSON_free(r->cell_json[k]);
      continue;
    }
    r->cells[kept] = r->cells[k];
    r->cell_json[kept] = r->cell_json[k];
    kept++;
  }
  int removed = r->n_cells - kept;
  r->n_cells = kept;
  return removed;
}

int fp_results_find(const fp_results *r, const fp_cell *key) {
  for (int k = 0; k < r->n_cells; ++k)
    if (fp_cell_same_key(&r->cells[k], key))
      return k;
  return -1;
}

typedef struct ranked {
  int64_t rank;
  int index;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return x->index < y->index ? -1 : (x->index > y->index); /* stable */
}

fp_status fp_results_reorder(fp_results *r, const int64_t *rank) {
  if (r->n_cells < 2)
    return FP_OK;
  size_t n = (size_t)r->n_cells;
  ranked *order = malloc(sizeof *order * n);
  fp_cell *cells = malloc(sizeof *cells * n);
  char **json = malloc(sizeof *json * n);
  if (order == NULL || cells == NULL || json == NULL) {
    free(order);
    free(cells);
    free(json);
    return fp_error(FP_ERR_OUT_OF_MEMORY, "results: no host memory to sort %zu cells", n);
  }
  for (size_t k = 0; k < n; ++k) {
    order[k].rank = rank[k];
    order[k].index = (int)k;
  }
  qsort(order, n, sizeof *order, cmp_ranked);
  for (size_t k = 0; k < n; ++k) {
    cells[k] = r->cells[order[k].index];
    json[k] = r->cell_json[order[k].index];
  }
  free(r->cells);
  free(r->cell_json);
  free(order);
  r->cells = cells;
  r->cell_json = json;
  r->cap_cells = (int)n;
  return FP_OK;
}

/* ---- JSON --------------------------------------------------------------------------- */

static const char *const meta_strings[] = {"device",           "driver",     "backend", "platform",
                                           "fuseport_version", "git_commit", "date",    "host"};
#define N_META_STRINGS (int)(sizeof meta_strings / sizeof meta_strings[0])

static char *meta_field(fp_results_meta *m, int k, size_t *len) {
  char *fields[N_META_STRINGS] = {m->device,           m->driver,     m->backend, m->platform,
                                  m->fuseport_version, m->git_commit, m->date,    m->host};
  size_t lens[N_META_STRINGS] = {
      sizeof m->device,           sizeof m->driver,     sizeof m->backend, sizeof m->platform,
      sizeof m->fuseport_version, sizeof m->git_commit, sizeof m->date,    sizeof m->host};
  *len = lens[k];
  return fields[k];
}

static bool is_known_meta_key(const char *key) {
  for (int k = 0; k < N_META_STRINGS; ++k)
    if (strcmp(key, meta_strings[k]) == 0)
      return true;
  return strcmp(key, "options") == 0 || strcmp(key, "copy_gbps") == 0 ||
         strcmp(key, "running") == 0 || strcmp(key, "peak_tflops") == 0;
}

/* cJSON prints NaN and infinities as null, which is what a missing number is. */
static bool add_number(cJSON *obj, const char *key, double v) {
  return cJSON_AddNumberToObject(obj, key, v) != NULL;
}

static cJSON *meta_to_json(fp_results_meta *m) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL;
  for (int k = 0; ok && k < N_META_STRINGS; ++k) {
    size_t len;
    ok = cJSON_AddStringToObject(o, meta_strings[k], meta_field(m, k, &len)) != NULL;
  }
  if (ok) {
    cJSON *opts = m->options != NULL ? cJSON_Duplicate(m->options, 1) : cJSON_CreateObject();
    ok = opts != NULL && cJSON_AddItemToObject(o, "options", opts);
    if (!ok)
      cJSON_Delete(opts);
  }
  ok = ok && add_number(o, "copy_gbps", m->copy_gbps);
  if (ok && m->has_peaks) {
    cJSON *peaks = cJSON_AddObjectToObject(o, "peak_tflops");
    ok = peaks != NULL;
    for (int k = 0; ok && k < m->n_peaks; ++k) {
      cJSON *p = cJSON_AddObjectToObject(peaks, m->peaks[k].dtype);
      ok = p != NULL && add_number(p, "tflops", m->peaks[k].tflops) &&
           cJSON_AddStringToObject(p, "source", m->peaks[k].source) != NULL;
    }
  }
  if (ok && m->running) {
    cJSON *run = cJSON_AddObjectToObject(o, "running");
    cJSON *shape = fp_shape_to_json(&m->running_key.shape);
    ok = run != NULL && shape != NULL &&
         cJSON_AddStringToObject(run, "op", m->running_key.op) != NULL &&
         cJSON_AddStringToObject(run, "params", m->running_key.params) != NULL &&
         cJSON_AddItemToObject(run, "shape", shape) &&
         add_number(run, "attempt", m->running_attempt > 1 ? m->running_attempt : 1);
    if (!ok && (run == NULL || cJSON_GetObjectItemCaseSensitive(run, "shape") == NULL))
      cJSON_Delete(shape);
  }
  for (cJSON *e = m->extra != NULL ? m->extra->child : NULL; ok && e != NULL; e = e->next) {
    cJSON *dup = cJSON_Duplicate(e, 1);
    ok = dup != NULL && cJSON_AddItemToObject(o, e->string, dup);
    if (!ok)
      cJSON_Delete(dup);
  }
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *cell_to_json(const fp_cell *c) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  bool ok = cJSON_AddStringToObject(o, "op", c->op) != NULL &&
            cJSON_AddStringToObject(o, "variant", c->variant) != NULL &&
            cJSON_AddStringToObject(o, "backend", c->backend) != NULL &&
            cJSON_AddStringToObject(o, "params", c->params) != NULL;
  if (ok) {
    cJSON *shape = fp_shape_to_json(&c->shape);
    ok = shape != NULL && cJSON_AddItemToObject(o, "shape", shape);
    if (!ok)
      cJSON_Delete(shape);
  }
  ok = ok && cJSON_AddStringToObject(o, "status", fp_cell_status_name(c->status)) != NULL;
  ok = ok && add_number(o, "median_us", c->median_us) && add_number(o, "min_us", c->min_us) &&
       add_number(o, "max_us", c->max_us) && add_number(o, "reps", c->reps) &&
       add_number(o, "kernels", c->kernels) && add_number(o, "library_calls", c->library_calls) &&
       add_number(o, "bytes", c->bytes) && add_number(o, "gbps", c->gbps) &&
       add_number(o, "bw_frac", c->bw_frac) && add_number(o, "roof_frac", c->roof_frac) &&
       add_number(o, "flops", c->flops) && add_number(o, "gflops", c->gflops) &&
       add_number(o, "footprint_bytes", c->footprint_bytes) &&
       add_number(o, "peak_bytes", c->peak_bytes) && add_number(o, "compile_ms", c->compile_ms) &&
       add_number(o, "max_abs_err", c->max_abs_err) &&
       add_number(o, "max_rel_err", c->max_rel_err) && add_number(o, "rel_l2_err", c->rel_l2_err);
  ok = ok && cJSON_AddBoolToObject(o, "ok", c->ok) != NULL &&
       cJSON_AddStringToObject(o, "message", c->message) != NULL;
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* A growing text buffer. */
typedef struct text_buf {
  char *data;
  size_t len, cap;
  bool failed;
} text_buf;

static void tb_append(text_buf *b, const char *s, size_t n) {
  if (b->failed)
    return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap > 0 ? b->cap : 4096;
    while (b->len + n + 1 > cap)
      cap *= 2;
    char *data = realloc(b->data, cap);
    if (data == NULL) {
      b->failed = true;
      return;
    }
    b->data = data;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void tb_puts(text_buf *b, const char *s) { tb_append(b, s, strlen(s)); }

static fp_status tb_finish(text_buf *b, char **text) {
  if (b->failed || b->data == NULL) {
    free(b->data);
    *text = NULL;
    return fp_error(FP_ERR_OUT_OF_MEMORY, "results: no host memory for the output text");
  }
  *text = b->data;
  return FP_OK;
}

fp_status fp_results_to_json(fp_results *r, char **text) {
  *text = NULL;
  cJSON *meta = meta_to_json(&r->meta);
  char *meta_text = meta != NULL ? cJSON_Print(meta) : NULL;
  cJSON_Delete(meta);
  if (meta_text == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "results: cannot format the meta data as JSON");
  text_buf b = {NULL, 0, 0, false};
  tb_puts(&b, "{\"meta\": ");
  tb_puts(&b, meta_text);
  cJSON_free(meta_text);
  tb_puts(&b, ",\n\"cells\": [");
  for (int k = 0; k < r->n_cells; ++k) {
    if (r->cell_json[k] == NULL) {
      cJSON *c = cell_to_json(&r->cells[k]);
      r->cell_json[k] = c != NULL ? cJSON_PrintUnformatted(c) : NULL;
      cJSON_Delete(c);
      if (r->cell_json[k] == NULL) {
        free(b.data);
        return fp_error(FP_ERR_OUT_OF_MEMORY, "results: cannot format cell %d as JSON", k);
      }
    }
    tb_puts(&b, k > 0 ? ",\n" : "\n");
    tb_puts(&b, r->cell_json[k]);
  }
  tb_puts(&b, "\n]}\n");
  return tb_finish(&b, text);
}

/* Reading: a field that is absent or null is NaN (numbers) or "" (strings). */
static fp_status get_string(const cJSON *obj, const char *key, char *dst, size_t len,
                            const char *where) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (it == NULL || cJSON_IsNull(it)) {
    dst[0] = '\0';
    return FP_OK;
  }
  if (!cJSON_IsString(it))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"%s\" is not a string", where, key);
  snprintf(dst, len, "%s", it->valuestring);
  return FP_OK;
}

static fp_status get_number(const cJSON *obj, const char *key, double *dst, const char *where) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (it == NULL || cJSON_IsNull(it)) {
    *dst = NAN;
    return FP_OK;
  }
  if (!cJSON_IsNumber(it))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"%s\" is not a number", where, key);
  *dst = it->valuedouble;
  return FP_OK;
}

static fp_status cell_from_json(const cJSON *o, fp_cell *c, const char *where) {
  fp_cell_init(c);
  if (!cJSON_IsObject(o))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s is not an object", where);
  fp_status st = get_string(o, "op", c->op, sizeof c->op, where);
  if (st == FP_OK)
    st = get_string(o, "variant", c->variant, sizeof c->variant, where);
  if (st == FP_OK)
    st = get_string(o, "backend", c->backend, sizeof c->backend, where);
  if (st == FP_OK)
    st = get_string(o, "params", c->params, sizeof c->params, where);
  if (st == FP_OK)
    st = get_string(o, "message", c->message, sizeof c->message, where);
  if (st != FP_OK)
    return st;
  if (c->op[0] == '\0' || c->variant[0] == '\0')
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s has no op or variant", where);
  if (!fp_shape_from_json(cJSON_GetObjectItemCaseSensitive(o, "shape"), &c->shape))
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "%s: \"shape\" is not a list of 2 to %d integer dimensions in [1, 2^53]", where,
                    FP_SHAPE_MAX_DIMS);
  char status[16];
  st = get_string(o, "status", status, sizeof status, where);
  if (st != FP_OK)
    return st;
  if (!fp_cell_status_parse(status, &c->status))
    return fp_error(FP_ERR_INVALID_ARGUMENT,
                    "%s: status '%s' is not one of ok, fail, oom, error, unsupported", where,
                    status);
  struct {
    const char *key;
    double *dst;
  } nums[] = {{"median_us", &c->median_us},
              {"min_us", &c->min_us},
              {"max_us", &c->max_us},
              {"reps", &c->reps},
              {"kernels", &c->kernels},
              {"library_calls", &c->library_calls},
              {"bytes", &c->bytes},
              {"gbps", &c->gbps},
              {"bw_frac", &c->bw_frac},
              {"roof_frac", &c->roof_frac},
              {"flops", &c->flops},
              {"gflops", &c->gflops},
              {"footprint_bytes", &c->footprint_bytes},
              {"peak_bytes", &c->peak_bytes},
              {"compile_ms", &c->compile_ms},
              {"max_abs_err", &c->max_abs_err},
              {"max_rel_err", &c->max_rel_err},
              {"rel_l2_err", &c->rel_l2_err}};
  for (size_t k = 0; k < sizeof nums / sizeof nums[0]; ++k) {
    st = get_number(o, nums[k].key, nums[k].dst, where);
    if (st != FP_OK)
      return st;
  }
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "ok");
  c->ok = cJSON_IsTrue(ok);
  return FP_OK;
}

/* meta.peak_tflops: {"f16": {"tflops": x or null, "source": "..."}, ...}. */
static fp_status peaks_from_json(const cJSON *peaks, fp_results_meta *m, const char *where) {
  m->has_peaks = false;
  m->n_peaks = 0;
  if (peaks == NULL)
    return FP_OK;
  if (!cJSON_IsObject(peaks))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"peak_tflops\" is not an object", where);
  for (const cJSON *e = peaks->child; e != NULL; e = e->next) {
    double tflops = NAN;
    char source[192];
    fp_status st = cJSON_IsObject(e)
                       ? get_number(e, "tflops", &tflops, where)
                       : fp_error(FP_ERR_INVALID_ARGUMENT,
                                  "%s: peak_tflops.%s is not {tflops, source}", where, e->string);
    if (st == FP_OK)
      st = get_string(e, "source", source, sizeof source, where);
    if (st == FP_OK)
      st = fp_results_set_peak(m, e->string, tflops, source);
    if (st != FP_OK)
      return st;
  }
  m->has_peaks = true;
  return FP_OK;
}

static fp_status meta_from_json(const cJSON *o, fp_results_meta *m, const char *name) {
  if (!cJSON_IsObject(o))
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"meta\" is missing or not an object", name);
  char where[512];
  snprintf(where, sizeof where, "%s: meta", name);
  for (int k = 0; k < N_META_STRINGS; ++k) {
    size_t len;
    char *dst = meta_field(m, k, &len);
    fp_status st = get_string(o, meta_strings[k], dst, len, where);
    if (st != FP_OK)
      return st;
  }
  fp_status st = get_number(o, "copy_gbps", &m->copy_gbps, where);
  if (st != FP_OK)
    return st;
  st = peaks_from_json(cJSON_GetObjectItemCaseSensitive(o, "peak_tflops"), m, where);
  if (st != FP_OK)
    return st;
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "running");
  if (run != NULL && !cJSON_IsNull(run)) {
    fp_cell_init(&m->running_key);
    if (!cJSON_IsObject(run) ||
        !fp_shape_from_json(cJSON_GetObjectItemCaseSensitive(run, "shape"), &m->running_key.shape))
      return fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"running\" is not {op, params, shape}", where);
    st = get_string(run, "op", m->running_key.op, sizeof m->running_key.op, where);
    if (st == FP_OK)
      st = get_string(run, "params", m->running_key.params, sizeof m->running_key.params, where);
    if (st != FP_OK)
      return st;
    const cJSON *attempt = cJSON_GetObjectItemCaseSensitive(run, "attempt");
    m->running_attempt = 1; /* files from before the count */
    if (attempt != NULL) {
      if (!cJSON_IsNumber(attempt) ||
          !(attempt->valuedouble >= 1 && attempt->valuedouble <= 1000) ||
          attempt->valuedouble != (int)attempt->valuedouble)
        return fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"running\": \"attempt\" is not 1, 2, ...",
                        where);
      m->running_attempt = (int)attempt->valuedouble;
    }
    m->running = true;
  }
  const cJSON *opts = cJSON_GetObjectItemCaseSensitive(o, "options");
  m->options = cJSON_IsObject(opts) ? cJSON_Duplicate(opts, 1) : cJSON_CreateObject();
  if (m->options == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "%s: no host memory", name);
  for (const cJSON *e = o->child; e != NULL; e = e->next) {
    if (is_known_meta_key(e->string))
      continue;
    if (m->extra == NULL && (m->extra = cJSON_CreateObject()) == NULL)
      return fp_error(FP_ERR_OUT_OF_MEMORY, "%s: no host memory", name);
    cJSON *dup = cJSON_Duplicate(e, 1);
    if (dup == NULL || !cJSON_AddItemToObject(m->extra, e->string, dup)) {
      cJSON_Delete(dup);
      return fp_error(FP_ERR_OUT_OF_MEMORY, "%s: no host memory", name);
    }
  }
  return FP_OK;
}

fp_status fp_results_from_json(const char *text, const char *name, fp_results *r) {
  fp_results_init(r);
  cJSON *root = cJSON_Parse(text);
  if (root == NULL) {
    const char *at = cJSON_GetErrorPtr();
    int line = 1;
    for (const char *s = text; at != NULL && s < at && *s != '\0'; ++s)
      line += *s == '\n';
    return fp_error(FP_ERR_INVALID_ARGUMENT, "%s is not valid JSON (near line %d)", name, line);
  }
  fp_status st = FP_OK;
  if (!cJSON_IsObject(root))
    st = fp_error(FP_ERR_INVALID_ARGUMENT, "%s: not a fuseport results file (no top object)", name);
  if (st == FP_OK)
    st = meta_from_json(cJSON_GetObjectItemCaseSensitive(root, "meta"), &r->meta, name);
  const cJSON *cells = cJSON_GetObjectItemCaseSensitive(root, "cells");
  if (st == FP_OK && !cJSON_IsArray(cells))
    st = fp_error(FP_ERR_INVALID_ARGUMENT, "%s: \"cells\" is missing or not an array", name);
  int index = 0;
  for (const cJSON *c = cells != NULL ? cells->child : NULL; st == FP_OK && c != NULL;
       c = c->next, ++index) {
    char where[512];
    snprintf(where, sizeof where, "%s: cell %d", name, index);
    fp_cell cell;
    st = cell_from_json(c, &cell, where);
    if (st == FP_OK && fp_results_find(r, &cell) >= 0) {
      char shape[128];
      fp_shape_format(&cell.shape, shape, sizeof shape);
      st = fp_error(FP_ERR_INVALID_ARGUMENT, "%s: cell %d (%s %s %s) appears twice", name, index,
                    cell.op, cell.variant, shape);
    }
    if (st == FP_OK)
      st = fp_results_add(r, &cell);
  }
  cJSON_Delete(root);
  if (st != FP_OK)
    fp_results_free(r);
  return st;
}

fp_status fp_read_file(const char *path, char **data, size_t *len) {
  *data = NULL;
  if (len != NULL)
    *len = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return fp_error(FP_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1)
      break;
    cap *= 2;
    char *bigger = realloc(buf, cap);
    if (bigger == NULL) {
      free(buf);
      buf = NULL;
    } else {
      buf = bigger;
    }
  }
  bool error = ferror(f) != 0;
  fclose(f);
  if (buf == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory to read %s", path);
  if (error) {
    free(buf);
    return fp_error(FP_ERR_IO, "cannot read %s", path);
  }
  buf[n] = '\0';
  *data = buf;
  if (len != NULL)
    *len = n;
  return FP_OK;
}

fp_status fp_results_read_file(const char *path, fp_results *r) {
  fp_results_init(r);
  char *text = NULL;
  fp_status st = fp_read_file(path, &text, NULL);
  if (st != FP_OK)
    return st;
  st = fp_results_from_json(text, path, r);
  free(text);
  return st;
}

/* ---- CSV ------------------------------------------------------------------------------ */

static void csv_number(text_buf *b, double v) {
  char num[64] = "";
  if (isfinite(v)) {
    if (v == floor(v) && fabs(v) < 1e15)
      snprintf(num, sizeof num, "%.0f", v);
    else
      snprintf(num, sizeof num, "%.9g", v);
  }
  tb_puts(b, ",");
  tb_puts(b, num);
}

/* RFC 4180: quoted when it holds a comma, a quote or a line break. */
static void csv_string(text_buf *b, const char *s, bool first) {
  if (!first)
    tb_puts(b, ",");
  if (strpbrk(s, ",\"\r\n") == NULL) {
    tb_puts(b, s);
    return;
  }
  tb_puts(b, "\"");
  for (const char *p = s; *p != '\0'; ++p)
    tb_append(b, *p == '"' ? "\"\"" : p, *p == '"' ? 2 : 1);
  tb_puts(b, "\"");
}

fp_status fp_results_to_csv(const fp_results *r, char **text) {
  text_buf b = {NULL, 0, 0, false};
  tb_puts(&b, FP_RESULTS_CSV_HEADER "\n");
  for (int k = 0; k < r->n_cells; ++k) {
    const fp_cell *c = &r->cells[k];
    csv_string(&b, c->op, true);
    csv_string(&b, c->variant, false);
    csv_string(&b, c->backend, false);
    csv_string(&b, c->params, false);
    char shape[128];
    fp_shape_format(&c->shape, shape, sizeof shape);
    csv_string(&b, shape, false);
    /* dim0, dim1: rank-2 cells only (as before N-dim shapes) */
    csv_number(&b, c->shape.n == 2 ? (double)c->shape.d[0] : NAN);
    csv_number(&b, c->shape.n == 2 ? (double)c->shape.d[1] : NAN);
    csv_string(&b, fp_cell_status_name(c->status), false);
    const double nums[] = {c->median_us,       c->min_us,        c->max_us,     c->reps,
                           c->kernels,         c->library_calls, c->bytes,      c->gbps,
                           c->bw_frac,         c->roof_frac,     c->flops,      c->gflops,
                           c->footprint_bytes, c->peak_bytes,    c->compile_ms, c->max_abs_err,
                           c->max_rel_err,     c->rel_l2_err};
    for (size_t j = 0; j < sizeof nums / sizeof nums[0]; ++j)
      csv_number(&b, nums[j]);
    csv_string(&b, c->ok ? "true" : "false", false);
    csv_string(&b, c->message, false);
    tb_puts(&b, "\n");
  }
  return tb_finish(&b, text);
}

/* ---- files ------------------------------------------------------------------------------ */

fp_status fp_write_file_atomic(const char *path, const char *data, size_t len) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  char *dir_copy = strdup(path);
  if (tmp == NULL || dir_copy == NULL) {
    free(tmp);
    free(dir_copy);
    return fp_error(FP_ERR_OUT_OF_MEMORY, "no host memory to write %s", path);
  }
  /* The temporary sits next to the target so that rename() stays within one
   * file system and is atomic. */
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  fp_status st = FP_OK;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) {
    st = fp_error(FP_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
  } else {
    size_t done = 0;
    while (st == FP_OK && done < len) {
      ssize_t w = write(fd, data + done, len - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        st = fp_error(FP_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
      else
        done += (size_t)w;
    }
    if (st == FP_OK && fsync(fd) != 0)
      st = fp_error(FP_ERR_IO, "cannot flush %s to disk: %s", tmp, strerror(errno));
    if (close(fd) != 0 && st == FP_OK)
      st = fp_error(FP_ERR_IO, "cannot close %s: %s", tmp, strerror(errno));
    if (st == FP_OK && rename(tmp, path) != 0)
      st = fp_error(FP_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st != FP_OK)
      (void)unlink(tmp);
  }
  if (st == FP_OK) {
    /* Make the rename itself durable; a failure here loses nothing that a
     * reader could see, so it is not an error. */
    int dfd = open(dirname(dir_copy), O_RDONLY);
    if (dfd >= 0) {
      (void)fsync(dfd);
      (void)close(dfd);
    }
  }
  free(tmp);
  free(dir_copy);
  return st;
}
