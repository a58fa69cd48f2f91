/* fuseport backend layer: validation, counters and the memory cap, shared by
 * every backend. The backends (cpu/, opencl/, cuda/) only talk to devices. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"

/* ---- errors ------------------------------------------------------------- */

fp_status fp_ctx_error(fp_context *ctx, fp_status status, const char *fmt, ...) {
  char msg[FP_ERROR_MESSAGE_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (ctx != NULL)
    snprintf(ctx->error, sizeof ctx->error, "%s", msg);
  return fp_error(status, "%s", msg);
}

void fp_copy_string(char *dst, size_t dstlen, const char *src) {
  if (dstlen == 0)
    return;
  snprintf(dst, dstlen, "%s", src != NULL ? src : "");
}

/* ---- backends ------------------------------------------------------------- */

static const char *const backend_names[FP_BACKEND_COUNT] = {"cpu", "opencl", "cuda"};

static const fp_backend_ops *backend_ops(fp_backend_kind kind) {
  switch (kind) {
  case FP_BACKEND_CPU:
    return &fp_cpu_backend_ops;
  case FP_BACKEND_OPENCL:
#ifdef FUSEPORT_HAVE_OPENCL
    return &fp_opencl_backend_ops;
#else
    return NULL;
#endif
  case FP_BACKEND_CUDA:
#ifdef FUSEPORT_HAVE_CUDA
    return &fp_cuda_backend_ops;
#else
    return NULL;
#endif
  case FP_BACKEND_COUNT:
    break;
  }
  return NULL;
}

const char *fp_backend_name(fp_backend_kind kind) {
  if ((unsigned)kind >= FP_BACKEND_COUNT)
    return "unknown";
  return backend_names[kind];
}

fp_status fp_backend_parse(const char *name, fp_backend_kind *out) {
  if (name == NULL || out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_backend_parse: NULL argument");
  for (int k = 0; k < FP_BACKEND_COUNT; ++k) {
    if (strcmp(name, backend_names[k]) == 0) {
      *out = (fp_backend_kind)k;
      return FP_OK;
    }
  }
  return fp_error(FP_ERR_NOT_FOUND, "unknown backend '%s' (known: cpu, opencl, cuda)", name);
}

bool fp_backend_compiled(fp_backend_kind kind) { return backend_ops(kind) != NULL; }

int fp_backend_device_count(fp_backend_kind kind, const char *platform) {
  const fp_backend_ops *ops = backend_ops(kind);
  return ops != NULL ? ops->device_count(platform) : 0;
}

/* ---- contexts ----------------------------------------------------------- */

void fp_context_options_init(fp_context_options *opts) {
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof *opts);
  opts->backend = FP_BACKEND_CPU;
  opts->device_index = -1;
}

fp_status fp_context_create(const fp_context_options *opts, fp_context **out) {
  if (out == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_context_create: out is NULL");
  *out = NULL;
  if (opts == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_context_create: options are NULL");
  if ((unsigned)opts->backend >= FP_BACKEND_COUNT)
    return fp_error(FP_ERR_NOT_FOUND, "fp_context_create: unknown backend %d", (int)opts->backend);
  const fp_backend_ops *ops = backend_ops(opts->backend);
  if (ops == NULL)
    return fp_error(FP_ERR_UNSUPPORTED,
                    "backend '%s' is not compiled into this build of fuseport (%s)",
                    backend_names[opts->backend],
                    opts->backend == FP_BACKEND_CUDA
                        ? "configure with nvcc on PATH"
                        : "configure with the OpenCL headers and ICD loader installed");
  fp_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return fp_error(FP_ERR_OUT_OF_MEMORY, "fp_context_create: host allocation failed");
  ctx->ops = ops;
  ctx->kind = opts->backend;
  fp_status st = ops->init(ctx, opts);
  if (st != FP_OK) {
    /* init reported through fp_ctx_error, which also set the thread's message */
    free(ctx);
    return st;
  }
  if (ctx->device_mem_limit == 0)
    ctx->device_mem_limit = ctx->info.global_mem_bytes;
  ctx->info.backend = opts->backend;
  if (ctx->info.local_mem_optin_bytes < ctx->info.local_mem_bytes)
    ctx->info.local_mem_optin_bytes = ctx->info.local_mem_bytes;
  ctx->mem_limit = opts->mem_limit_bytes != 0 ? opts->mem_limit_bytes : ctx->device_mem_limit;
  *out = ctx;
  return FP_OK;
}

void fp_context_destroy(fp_context *ctx) {
  if (ctx == NULL)
    return;
  /* what the caller left alive goes with the context: a later free of it is
   * then a no-op rather than a use of the freed context */
  while (ctx->buffers != NULL)
    fp_buffer_free(ctx->buffers);
  while (ctx->events != NULL)
    fp_event_destroy(ctx->events);
  ctx->ops->shutdown(ctx);
  free(ctx);
}

const char *fp_context_error(const fp_context *ctx) { return ctx != NULL ? ctx->error : ""; }

fp_backend_kind fp_context_backend(const fp_context *ctx) {
  return ctx != NULL ? ctx->kind : FP_BACKEND_COUNT;
}

const fp_device_info *fp_context_device(const fp_context *ctx) {
  return ctx != NULL ? &ctx->info : NULL;
}

fp_status fp_context_set_mem_limit(fp_context *ctx, uint64_t bytes) {
  if (ctx == NULL)
    return fp_error(FP_ERR_INVALID_ARGUMENT, "fp_context_set_mem_limit: context is NULL");
  ctx->mem_limit = bytes != 0 ? bytes : ctx->device_mem_limit;
  return FP_OK;
}

uint64_t fp_context_mem_limit(const fp_context *ctx) { return ctx != NULL ? ctx->mem_limit : 0; }

/* ---- buffers -------------------------------------------------------------- */

#define CHECK_CTX(ctx, fn)                                                                         \
  do {                                                                                             \
    if ((ctx) == NULL)                                                                             \
      return fp_error(FP_ERR_INVALID_ARGUMENT, fn ": context is NULL");                            \
  } while (0)

fp_status fp_check_buffer(fp_context *ctx, const fp_buffer *buf, const char *fn, const char *what) {
  if (buf == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s: %s buffer is NULL", fn, what);
  if (!fp_live_contains(buf) || buf->magic != FP_BUFFER_MAGIC)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "%s: %s buffer is not a live fuseport buffer (freed?)", fn, what);
  if (buf->ctx != ctx)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s: %s buffer belongs to another context",
                        fn, what);
  return FP_OK;
}

static fp_status check_range(fp_context *ctx, const fp_buffer *buf, uint64_t offset, uint64_t bytes,
                             const char *fn, const char *what) {
  if (bytes == 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s: byte count is 0", fn);
  if (offset > buf->bytes || bytes > buf->bytes - offset)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "%s: range [%llu, %llu+%llu) is outside the %s buffer of %llu bytes", fn,
                        (unsigned long long)offset, (unsigned long long)offset,
                        (unsigned long long)bytes, what, (unsigned long long)buf->bytes);
  return FP_OK;
}

fp_status fp_buffer_alloc(fp_context *ctx, uint64_t bytes, fp_buffer **out) {
  CHECK_CTX(ctx, "fp_buffer_alloc");
  if (out == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_buffer_alloc: out is NULL");
  *out = NULL;
  if (bytes == 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_buffer_alloc: size is 0 bytes");
  if (bytes > ctx->mem_limit || ctx->counters.bytes_current > ctx->mem_limit - bytes)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY,
                        "out of device memory: %llu bytes requested with %llu in use, limit "
                        "%llu bytes on %s device '%s'",
                        (unsigned long long)bytes, (unsigned long long)ctx->counters.bytes_current,
                        (unsigned long long)ctx->mem_limit, backend_names[ctx->kind],
                        ctx->info.name);
  fp_buffer *buf = calloc(1, sizeof *buf);
  if (buf == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "fp_buffer_alloc: host allocation failed");
  fp_status st = ctx->ops->alloc(ctx, bytes, &buf->handle);
  if (st != FP_OK) {
    free(buf);
    return st;
  }
  buf->magic = FP_BUFFER_MAGIC;
  buf->ctx = ctx;
  buf->bytes = bytes;
  if (!fp_live_add(buf)) {
    ctx->ops->release(ctx, buf->handle);
    free(buf);
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "fp_buffer_alloc: host allocation failed");
  }
  buf->next = ctx->buffers;
  if (ctx->buffers != NULL)
    ctx->buffers->prev = buf;
  ctx->buffers = buf;
  fp_counters *c = &ctx->counters;
  c->allocations++;
  c->bytes_allocated += bytes;
  c->bytes_current += bytes;
  if (c->bytes_current > c->bytes_peak)
    c->bytes_peak = c->bytes_current;
  *out = buf;
  return FP_OK;
}

void fp_buffer_free(fp_buffer *buf) {
  /* a pointer freed before (or never allocated) is not in the live set: its
   * memory is not read */
  if (buf == NULL || !fp_live_remove(buf))
    return;
  fp_context *ctx = buf->ctx;
  ctx->ops->release(ctx, buf->handle);
  ctx->counters.bytes_current -= buf->bytes;
  if (buf->prev != NULL)
    buf->prev->next = buf->next;
  else
    ctx->buffers = buf->next;
  if (buf->next != NULL)
    buf->next->prev = buf->prev;
  buf->magic = 0;
  free(buf);
}

uint64_t fp_buffer_size(const fp_buffer *buf) { return fp_live_contains(buf) ? buf->bytes : 0; }

fp_context *fp_buffer_context(const fp_buffer *buf) {
  return fp_live_contains(buf) ? buf->ctx : NULL;
}

fp_status fp_buffer_write(fp_context *ctx, fp_buffer *dst, uint64_t offset, const void *src,
                          uint64_t bytes) {
  CHECK_CTX(ctx, "fp_buffer_write");
  fp_status st = fp_check_buffer(ctx, dst, "fp_buffer_write", "destination");
  if (st == FP_OK)
    st = check_range(ctx, dst, offset, bytes, "fp_buffer_write", "destination");
  if (st == FP_OK && src == NULL)
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_buffer_write: host source is NULL");
  return st != FP_OK ? st : ctx->ops->write(ctx, dst->handle, offset, src, bytes);
}

fp_status fp_buffer_read(fp_context *ctx, const fp_buffer *src, uint64_t offset, void *dst,
                         uint64_t bytes) {
  CHECK_CTX(ctx, "fp_buffer_read");
  fp_status st = fp_check_buffer(ctx, src, "fp_buffer_read", "source");
  if (st == FP_OK)
    st = check_range(ctx, src, offset, bytes, "fp_buffer_read", "source");
  if (st == FP_OK && dst == NULL)
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_buffer_read: host destination is NULL");
  return st != FP_OK ? st : ctx->ops->read(ctx, src->handle, offset, dst, bytes);
}

fp_status fp_buffer_fill(fp_context *ctx, fp_buffer *dst, uint64_t offset, uint64_t bytes,
                         const void *pattern, size_t pattern_size) {
  CHECK_CTX(ctx, "fp_buffer_fill");
  fp_status st = fp_check_buffer(ctx, dst, "fp_buffer_fill", "destination");
  if (st == FP_OK)
    st = check_range(ctx, dst, offset, bytes, "fp_buffer_fill", "destination");
  if (st != FP_OK)
    return st;
  if (pattern == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_buffer_fill: pattern is NULL");
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8 &&
      pattern_size != 16)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "fp_buffer_fill: pattern size %zu is not 1, 2, 4, 8 or 16 bytes",
                        pattern_size);
  if (offset % pattern_size != 0 || bytes % pattern_size != 0)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "fp_buffer_fill: offset %llu and size %llu must be multiples of the "
                        "%zu-byte pattern",
                        (unsigned long long)offset, (unsigned long long)bytes, pattern_size);
  return ctx->ops->fill(ctx, dst->handle, offset, bytes, pattern, pattern_size);
}

fp_status fp_buffer_copy(fp_context *ctx, fp_buffer *dst, uint64_t dst_offset, const fp_buffer *src,
                         uint64_t src_offset, uint64_t bytes) {
  CHECK_CTX(ctx, "fp_buffer_copy");
  fp_status st = fp_check_buffer(ctx, dst, "fp_buffer_copy", "destination");
  if (st == FP_OK)
    st = fp_check_buffer(ctx, src, "fp_buffer_copy", "source");
  if (st == FP_OK)
    st = check_range(ctx, dst, dst_offset, bytes, "fp_buffer_copy", "destination");
  if (st == FP_OK)
    st = check_range(ctx, src, src_offset, bytes, "fp_buffer_copy", "source");
  if (st == FP_OK && dst == src &&
      !(dst_offset + bytes <= src_offset || src_offset + bytes <= dst_offset))
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "fp_buffer_copy: source and destination ranges overlap");
  return st != FP_OK ? st
                     : ctx->ops->copy(ctx, dst->handle, dst_offset, src->handle, src_offset, bytes);
}

/* ---- queue and events ------------------------------------------------------- */

fp_status fp_finish(fp_context *ctx) {
  CHECK_CTX(ctx, "fp_finish");
  return ctx->ops->finish(ctx);
}

#define FP_EVENT_MAGIC 0x66704576u /* "fpEv" */

static fp_status check_event(fp_context *ctx, const fp_event *ev, const char *fn) {
  if (ev == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s: event is NULL", fn);
  if (!fp_live_contains(ev) || ev->magic != FP_EVENT_MAGIC)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s: not a live fuseport event", fn);
  if (ev->ctx != ctx)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "%s: event belongs to another context", fn);
  return FP_OK;
}

fp_status fp_event_create(fp_context *ctx, fp_event **out) {
  CHECK_CTX(ctx, "fp_event_create");
  if (out == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_event_create: out is NULL");
  *out = NULL;
  fp_event *ev = calloc(1, sizeof *ev);
  if (ev == NULL)
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "fp_event_create: host allocation failed");
  fp_status st = ctx->ops->event_create(ctx, &ev->handle);
  if (st != FP_OK) {
    free(ev);
    return st;
  }
  ev->magic = FP_EVENT_MAGIC;
  ev->ctx = ctx;
  if (!fp_live_add(ev)) {
    ctx->ops->event_destroy(ctx, ev->handle);
    free(ev);
    return fp_ctx_error(ctx, FP_ERR_OUT_OF_MEMORY, "fp_event_create: host allocation failed");
  }
  ev->next = ctx->events;
  if (ctx->events != NULL)
    ctx->events->prev = ev;
  ctx->events = ev;
  *out = ev;
  return FP_OK;
}

void fp_event_destroy(fp_event *ev) {
  if (ev == NULL || !fp_live_remove(ev))
    return;
  fp_context *ctx = ev->ctx;
  ctx->ops->event_destroy(ctx, ev->handle);
  if (ev->prev != NULL)
    ev->prev->next = ev->next;
  else
    ctx->events = ev->next;
  if (ev->next != NULL)
    ev->next->prev = ev->prev;
  ev->magic = 0;
  free(ev);
}

fp_status fp_event_record(fp_context *ctx, fp_event *ev) {
  CHECK_CTX(ctx, "fp_event_record");
  fp_status st = check_event(ctx, ev, "fp_event_record");
  if (st == FP_OK)
    st = ctx->ops->event_record(ctx, ev->handle);
  if (st == FP_OK)
    ev->recorded = true;
  return st;
}

fp_status fp_event_synchronize(fp_context *ctx, fp_event *ev) {
  CHECK_CTX(ctx, "fp_event_synchronize");
  fp_status st = check_event(ctx, ev, "fp_event_synchronize");
  if (st == FP_OK && !ev->recorded)
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "fp_event_synchronize: event was never recorded");
  return st != FP_OK ? st : ctx->ops->event_synchronize(ctx, ev->handle);
}

fp_status fp_event_elapsed_ms(fp_context *ctx, fp_event *start, fp_event *end, double *ms) {
  CHECK_CTX(ctx, "fp_event_elapsed_ms");
  fp_status st = check_event(ctx, start, "fp_event_elapsed_ms");
  if (st == FP_OK)
    st = check_event(ctx, end, "fp_event_elapsed_ms");
  if (st == FP_OK && ms == NULL)
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_event_elapsed_ms: ms is NULL");
  if (st == FP_OK && (!start->recorded || !end->recorded))
    st = fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                      "fp_event_elapsed_ms: both events must be recorded first");
  return st != FP_OK ? st : ctx->ops->event_elapsed_ms(ctx, start->handle, end->handle, ms);
}

/* ---- kernels -------------------------------------------------------------- */

typedef struct kernel_decl {
  const char *name;
  const char *signature;
  fp_kernel_family family;
  bool required;
} kernel_decl;

static const kernel_decl kernel_table[FPK_COUNT] = {
#define FP_KERNEL(family, name, signature, required) {#name, signature, FPF_##family, required},
#include "kernels.def"
#undef FP_KERNEL
};

static const char *const family_names[FPF_COUNT] = {
#define FP_KERNEL_FAMILY(family) #family,
#include "kernels.def"
#undef FP_KERNEL_FAMILY
};

const char *fp_kernel_name(fp_kernel_id id) {
  return (unsigned)id < FPK_COUNT ? kernel_table[id].name : "unknown-kernel";
}

const char *fp_kernel_signature(fp_kernel_id id) {
  return (unsigned)id < FPK_COUNT ? kernel_table[id].signature : "";
}

fp_kernel_family fp_kernel_family_of(fp_kernel_id id) {
  return (unsigned)id < FPK_COUNT ? kernel_table[id].family : FPF_COUNT;
}

const char *fp_kernel_family_name(fp_kernel_family family) {
  return (unsigned)family < FPF_COUNT ? family_names[family] : "unknown-family";
}

bool fp_kernel_required(fp_kernel_id id) {
  return (unsigned)id < FPK_COUNT && kernel_table[id].required;
}

fp_status fp_kernel_lookup(fp_context *ctx, const char *name, fp_kernel_id *out) {
  CHECK_CTX(ctx, "fp_kernel_lookup");
  if (name == NULL || out == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "fp_kernel_lookup: NULL argument");
  for (int k = 0; k < FPK_COUNT; ++k) {
    if (strcmp(kernel_table[k].name, name) == 0) {
      if (!ctx->ops->kernel_available(ctx, (fp_kernel_id)k))
        return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED,
                            "kernel '%s' is not implemented by the %s "
                            "backend",
                            name, backend_names[ctx->kind]);
      *out = (fp_kernel_id)k;
      return FP_OK;
    }
  }
  return fp_ctx_error(ctx, FP_ERR_NOT_FOUND, "unknown kernel '%s'", name);
}

bool fp_kernel_available(fp_context *ctx, fp_kernel_id id) {
  return ctx != NULL && (unsigned)id < FPK_COUNT && ctx->ops->kernel_available(ctx, id);
}

fp_status fp_kernel_prepare(fp_context *ctx, fp_kernel_id id, double *compile_ms) {
  CHECK_CTX(ctx, "fp_kernel_prepare");
  if ((unsigned)id >= FPK_COUNT)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND, "fp_kernel_prepare: kernel id %d is out of range",
                        (int)id);
  if (!ctx->ops->kernel_available(ctx, id))
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "kernel '%s' is not implemented by the %s backend",
                        kernel_table[id].name, backend_names[ctx->kind]);
  double ms = 0.0;
  fp_status st = ctx->ops->kernel_prepare(ctx, id, &ms);
  if (st == FP_OK && compile_ms != NULL)
    *compile_ms = ms;
  return st;
}

fp_ndrange fp_ndrange_1d(uint64_t groups, uint32_t local) {
  fp_ndrange nd;
  memset(&nd, 0, sizeof nd);
  nd.dims = 1;
  nd.global[0] = groups * local;
  nd.local[0] = local;
  nd.global[1] = nd.global[2] = 1;
  nd.local[1] = nd.local[2] = 1;
  return nd;
}

fp_ndrange fp_ndrange_2d(uint64_t groups_x, uint32_t local_x, uint64_t groups_y, uint32_t local_y) {
  fp_ndrange nd = fp_ndrange_1d(groups_x, local_x);
  nd.dims = 2;
  nd.global[1] = groups_y * local_y;
  nd.local[1] = local_y;
  return nd;
}

fp_ndrange fp_planned_range(void) { return fp_ndrange_1d(1, 1); }

static fp_status check_ndrange(fp_context *ctx, const char *kname, const fp_ndrange *nd) {
  if (nd == NULL)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "launch of '%s': ndrange is NULL", kname);
  if (nd->dims < 1 || nd->dims > 3)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT, "launch of '%s': %u dimensions (1..3)", kname,
                        nd->dims);
  uint64_t group = 1;
  for (uint32_t d = 0; d < nd->dims; ++d) {
    if (nd->local[d] == 0 || nd->global[d] == 0 || nd->global[d] % nd->local[d] != 0)
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': global size %llu in dimension %u is not a positive "
                          "multiple of the local size %u",
                          kname, (unsigned long long)nd->global[d], d, nd->local[d]);
    group *= nd->local[d];
  }
  if (group > ctx->info.max_group_size)
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "launch of '%s': work-group of %llu items exceeds the device's %u", kname,
                        (unsigned long long)group, ctx->info.max_group_size);
  return FP_OK;
}

char fp_dtype_arg_letter(fp_dtype dtype) {
  switch (dtype) {
  case FP_F32:
    return (char)FP_ARG_BUFFER;
  case FP_F16:
    return (char)FP_ARG_BUF_F16;
  case FP_BF16:
    return (char)FP_ARG_BUF_BF16;
  case FP_U32:
    return (char)FP_ARG_BUF_U32;
  case FP_U8:
    return (char)FP_ARG_BUF_U8;
  default:
    return '?';
  }
}

/* What a signature letter stands for, for messages. */
static const char *arg_kind_text(char kind) {
  switch (kind) {
  case FP_ARG_BUFFER:
    return "f32 buffer";
  case FP_ARG_BUF_F16:
    return "f16 buffer";
  case FP_ARG_BUF_BF16:
    return "bf16 buffer";
  case FP_ARG_BUF_U32:
    return "u32 buffer";
  case FP_ARG_BUF_U8:
    return "u8 buffer";
  case FP_ARG_I32:
    return "int32";
  case FP_ARG_U32:
    return "uint32";
  case FP_ARG_I64:
    return "int64";
  case FP_ARG_F32:
    return "float";
  case FP_ARG_LOCAL:
    return "local memory";
  default:
    return "unknown";
  }
}

fp_status fp_launch(fp_context *ctx, fp_kernel_id id, const fp_ndrange *nd, const fp_arg *args,
                    int nargs) {
  CHECK_CTX(ctx, "fp_launch");
  if ((unsigned)id >= FPK_COUNT)
    return fp_ctx_error(ctx, FP_ERR_NOT_FOUND, "fp_launch: kernel id %d is out of range", (int)id);
  const kernel_decl *decl = &kernel_table[id];
  fp_status st = check_ndrange(ctx, decl->name, nd);
  if (st != FP_OK)
    return st;
  int expected = (int)strlen(decl->signature);
  if (nargs != expected || (nargs > 0 && args == NULL))
    return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                        "launch of '%s': %d arguments given, its signature \"%s\" has %d",
                        decl->name, nargs, decl->signature, expected);
  fp_karg resolved[FP_MAX_KERNEL_ARGS];
  if (nargs > FP_MAX_KERNEL_ARGS)
    return fp_ctx_error(ctx, FP_ERR_INTERNAL, "launch of '%s': more than %d arguments", decl->name,
                        FP_MAX_KERNEL_ARGS);
  for (int a = 0; a < nargs; ++a) {
    const char want = decl->signature[a];
    /* an upper-case buffer letter: the same type, and none is accepted */
    const bool optional = want >= 'A' && want <= 'Z' && want != (char)FP_ARG_LOCAL;
    const char want_kind = optional ? (char)(want - 'A' + 'a') : want;
    if ((char)args[a].kind != want_kind)
      return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                          "launch of '%s': argument %d is of kind '%c' (%s), the signature \"%s\" "
                          "wants '%c' (%s)",
                          decl->name, a, (char)args[a].kind, arg_kind_text((char)args[a].kind),
                          decl->signature, want, arg_kind_text(want_kind));
    resolved[a].kind = args[a].kind;
    switch (args[a].kind) {
    case FP_ARG_BUFFER:
    case FP_ARG_BUF_F16:
    case FP_ARG_BUF_BF16:
    case FP_ARG_BUF_U32:
    case FP_ARG_BUF_U8: {
      if (args[a].v.buf == NULL && optional) {
        resolved[a].v.handle = NULL;
        break;
      }
      char what[32];
      snprintf(what, sizeof what, "argument %d", a);
      st = fp_check_buffer(ctx, args[a].v.buf, decl->name, what);
      if (st != FP_OK)
        return st;
      resolved[a].v.handle = args[a].v.buf->handle;
      break;
    }
    case FP_ARG_I32:
      resolved[a].v.i32 = args[a].v.i32;
      break;
    case FP_ARG_U32:
      resolved[a].v.u32 = args[a].v.u32;
      break;
    case FP_ARG_I64:
      resolved[a].v.i64 = args[a].v.i64;
      break;
    case FP_ARG_F32:
      resolved[a].v.f32 = args[a].v.f32;
      break;
    case FP_ARG_LOCAL:
      if (a != nargs - 1)
        return fp_ctx_error(ctx, FP_ERR_INTERNAL, "launch of '%s': local memory must be last",
                            decl->name);
      if (args[a].v.local_bytes > ctx->info.local_mem_bytes)
        return fp_ctx_error(ctx, FP_ERR_INVALID_ARGUMENT,
                            "launch of '%s': %llu bytes of local memory exceed the device's %llu",
                            decl->name, (unsigned long long)args[a].v.local_bytes,
                            (unsigned long long)ctx->info.local_mem_bytes);
      resolved[a].v.local_bytes = args[a].v.local_bytes;
      break;
    }
  }
  st = fp_check_kernel_extents(ctx, id, args, nargs);
  if (st != FP_OK)
    return st;
  if (!ctx->ops->kernel_available(ctx, id))
    return fp_ctx_error(ctx, FP_ERR_UNSUPPORTED, "kernel '%s' is not implemented by the %s backend",
                        decl->name, backend_names[ctx->kind]);
  st = ctx->ops->launch(ctx, id, nd, resolved, nargs);
  if (st == FP_OK)
    ctx->counters.kernels_launched++;
  return st;
}

fp_status fp_launch_by_name(fp_context *ctx, const char *name, const fp_ndrange *nd,
                            const fp_arg *args, int nargs) {
  fp_kernel_id id;
  fp_status st = fp_kernel_lookup(ctx, name, &id);
  return st != FP_OK ? st : fp_launch(ctx, id, nd, args, nargs);
}

/* ---- counters --------------------------------------------------------------- */

void fp_counters_get(const fp_context *ctx, fp_counters *out) {
  if (out == NULL)
    return;
  if (ctx == NULL) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = ctx->counters;
}

void fp_counters_reset(fp_context *ctx) {
  if (ctx == NULL)
    return;
  uint64_t current = ctx->counters.bytes_current;
  memset(&ctx->counters, 0, sizeof ctx->counters);
  ctx->counters.bytes_current = current;
  ctx->counters.bytes_peak = current;
}
