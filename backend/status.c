/* fuseport: status names and the per-thread error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fp_status.h"

static _Thread_local char last_error[8192];

const char *fp_status_name(fp_status status) {
  switch (status) {
  case FP_OK:
    return "ok";
  case FP_ERR_INVALID_ARGUMENT:
    return "invalid-argument";
  case FP_ERR_OUT_OF_MEMORY:
    return "out-of-memory";
  case FP_ERR_UNSUPPORTED:
    return "unsupported";
  case FP_ERR_NOT_FOUND:
    return "not-found";
  case FP_ERR_BACKEND:
    return "backend-error";
  case FP_ERR_BUILD:
    return "build-error";
  case FP_ERR_IO:
    return "io-error";
  case FP_ERR_INTERNAL:
    return "internal-error";
  }
  return "unknown-status";
}

const char *fp_last_error(void) { return last_error; }

static void set_last_error(const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
}

fp_status fp_error(fp_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_last_error(fmt, ap);
  va_end(ap);
  return status;
}

void fp_copy_last_error(char *buf, size_t buflen) {
  if (buf == NULL || buflen == 0)
    return;
  snprintf(buf, buflen, "%s", last_error);
}
