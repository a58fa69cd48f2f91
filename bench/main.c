/* fuseport: the command. `fuseport help` lists the subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fp_git_commit.h"

static const char usage[] =
    "usage: fuseport <command> [options]\n"
    "\n"
    "fuseport runs fused and unfused GPU operators on CPU (emulated), OpenCL and\n"
    "CUDA backends, checks them against a float64 reference and measures what\n"
    "fusion buys.\n"
    "\n"
    "commands:\n"
    "  list     the operators, their variants and the backends present\n"
    "  check    run every op x variant on a backend against the float64 reference\n"
    "  bench    sweep ops x variants x shapes: time, bandwidth, memory, accuracy\n"
    "  compare  ratio grids of two bench result files, geometric mean per op\n"
    "  merge    join the result files of a sharded bench sweep\n"
    "  report   heatmaps of a bench result file (self-contained HTML, or SVGs)\n"
    "  help     this text; `fuseport <command> --help` explains a command\n"
    "\n"
    "examples:\n"
    "  fuseport list\n"
    "  fuseport check --backend opencl --op softmax,layernorm\n"
    "  fuseport bench                                  # a quick default sweep\n"
    "  fuseport bench --backend cuda --shapes seed --out cuda.json\n"
    "  fuseport compare opencl.json cuda.json\n"
    "  fuseport report cuda.json --html cuda.html\n"
    "\n"
    "exit status: 0 success, 1 a check or run failed, 2 bad usage\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return FP_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(usage, stdout);
    return FP_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("fuseport %s (%s)\n", FUSEPORT_VERSION, FUSEPORT_GIT_COMMIT);
    return FP_EXIT_OK;
  }
  if (strcmp(cmd, "list") == 0)
    return fp_cmd_list(argc - 1, argv + 1);
  if (strcmp(cmd, "check") == 0)
    return fp_cmd_check(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0)
    return fp_cmd_bench(argc - 1, argv + 1);
  if (strcmp(cmd, "compare") == 0)
    return fp_cmd_compare(argc - 1, argv + 1);
  if (strcmp(cmd, "merge") == 0)
    return fp_cmd_merge(argc - 1, argv + 1);
  if (strcmp(cmd, "report") == 0)
    return fp_cmd_report(argc - 1, argv + 1);
  fprintf(stderr, "fuseport: unknown command '%s'\n\n%s", cmd, usage);
  return FP_EXIT_USAGE;
}
