/* libFuzzer harness: `fuseport merge` and `fuseport compare` on up to four
 * results files, given as one input with the files separated by form feeds
 * (a byte JSON never holds outside a string's escapes). The files are
 * in-memory (memfd) and read through /proc/self/fd; merge writes its output,
 * when the shards make one sweep, into a scratch directory made once.
 *
 * Properties: neither subcommand crashes, hangs or leaks, whatever the
 * files hold; a file that merge writes reads back. */
#include "fuzz_util.h"

#include "cli.h"

#define MAX_FILES 4

static char out_dir[] = "/tmp/fuseport-fuzz-merge.XXXXXX";
static char out_path[sizeof out_dir + 16];

static void remove_out_dir(void) {
  (void)unlink(out_path);
  (void)rmdir(out_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  if (mkdtemp(out_dir) == NULL)
    return 1;
  snprintf(out_path, sizeof out_path, "%s/merged.json", out_dir);
  atexit(remove_out_dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fz_string(data, size);
  char paths[MAX_FILES][64];
  int fds[MAX_FILES], n = 0;
  char *save = NULL;
  for (char *f = strtok_r(text, "\f", &save); f != NULL && n < MAX_FILES;
       f = strtok_r(NULL, "\f", &save)) {
    fds[n] = fz_memfile(f, strlen(f), paths[n], sizeof paths[n]);
    if (fds[n] < 0)
      break;
    n++;
  }
  if (n >= 1) {
    char *argv[MAX_FILES + 3] = {"merge", out_path};
    for (int k = 0; k < n; ++k)
      argv[2 + k] = paths[k];
    if (fp_cmd_merge(2 + n, argv) == FP_EXIT_OK) {
      fp_results merged;
      FZ_CHECK(fp_results_read_file(out_path, &merged) == FP_OK);
      fp_results_free(&merged);
    }
    (void)unlink(out_path);
  }
  if (n >= 2) {
    static const char *const formats[] = {"table", "csv", "json"};
    char *argv[] = {"compare", paths[0], paths[1], "--format", (char *)formats[size % 3], NULL};
    (void)fp_cmd_compare(5, argv);
  }
  for (int k = 0; k < n; ++k)
    close(fds[k]);
  free(text);
  return 0;
}
