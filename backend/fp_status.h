/* fuseport: status codes and error messages.
 *
 * Errors are values. Every library call that can fail returns an fp_status;
 * the message that explains it (naming the argument, or carrying the vendor's
 * error code and string) is kept per context (fp_context_error) and per
 * thread (fp_last_error), so a caller that only has a NULL context still gets
 * a reason. The library never ends the process: every failure is returned.
 */
#ifndef FUSEPORT_FP_STATUS_H
#define FUSEPORT_FP_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp_status {
  FP_OK = 0,
  FP_ERR_INVALID_ARGUMENT = 1, /* bad size, NULL handle, mismatched shape */
  FP_ERR_OUT_OF_MEMORY = 2,    /* device memory (or the emulated cap) exhausted */
  FP_ERR_UNSUPPORTED = 3,      /* this backend or device cannot do it */
  FP_ERR_NOT_FOUND = 4,        /* unknown op, variant, backend, device or kernel */
  FP_ERR_BACKEND = 5,          /* a vendor API call failed (code and string in message) */
  FP_ERR_BUILD = 6,            /* a device program failed to build (log in message) */
  FP_ERR_IO = 7,               /* file or stream error */
  FP_ERR_INTERNAL = 8          /* a broken invariant inside fuseport */
} fp_status;

/* Short stable name of a status ("invalid-argument", "out-of-memory", ...). */
const char *fp_status_name(fp_status status);

/* The message of the most recent error raised on the calling thread ("" if
 * none). Valid until the next failing call on this thread. */
const char *fp_last_error(void);

/* Records an error for the calling thread and returns `status`, so that
 * `return fp_error(FP_ERR_..., "...")` reads naturally. */
fp_status fp_error(fp_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Copies the thread's last error into buf (truncating); no-op when buf is NULL. */
void fp_copy_last_error(char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif

#endif
