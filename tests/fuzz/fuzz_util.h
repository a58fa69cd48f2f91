/* Shared by the libFuzzer harnesses (tests/fuzz): the input as C strings,
 * property checks that crash (so that libFuzzer records the input), and
 * in-memory files for the subcommands that only take paths. */
#ifndef FUSEPORT_FUZZ_UTIL_H
#define FUSEPORT_FUZZ_UTIL_H

#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "bench_core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property of the parsers that must hold for every input: the harness
 * crashes, and libFuzzer keeps the input as a finding. The message goes to
 * stderr and, for runs with stderr closed (-close_fd_mask=2), to the
 * sanitizers' report. */
#define FZ_CHECK(cond)                                                                             \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      fz_fail(__FILE__, __LINE__, #cond);                                                          \
  } while (0)

static inline void fz_fail(const char *file, int line, const char *cond) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s:%d: property violated: %s", file, line, cond);
  fprintf(stderr, "%s\n", msg);
  __sanitizer_report_error_summary(msg);
  abort();
}

/* The input as one NUL-terminated string (cut at the first NUL byte, as a
 * command line or a file read by fp_read_file would be). */
static inline char *fz_string(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  FZ_CHECK(s != NULL);
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* An anonymous in-memory file holding text, and its path for the
 * subcommands that read files ("/proc/self/fd/N"); -1 when none. */
static inline int fz_memfile(const char *text, size_t len, char *path, size_t path_len) {
  int fd = memfd_create("fuseport-fuzz", MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, text + done, len - done);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    done += (size_t)w;
  }
  snprintf(path, path_len, "/proc/self/fd/%d", fd);
  return fd;
}

/* How many groups the spec's plan has (without building it): the harnesses
 * leave out plans past a few thousand groups, legal but too slow to fuzz (64
 * ops x 1024 shapes x 256 combinations of --param values is 16M groups). */
#define FZ_MAX_GROUPS 4096
static inline int64_t fz_plan_groups(const fp_bench_spec *s) {
  int64_t total = 0;
  for (int o = 0; o < s->n_ops; ++o) {
    int64_t combos = 1;
    for (int k = 0; k < s->n_params; ++k) {
      if (fp_op_param_index(s->ops[o], s->params[k].name) < 0)
        continue;
      int n = 1;
      for (const char *c = s->params[k].values; *c != '\0'; ++c)
        n += *c == ',';
      combos *= n;
    }
    total += combos * fp_bench_op_shape_count(s, s->ops[o]);
  }
  return total;
}

#endif
