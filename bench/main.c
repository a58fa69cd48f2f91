/* fuseport: the command. `fuseport help` lists the subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
    "  help     this text; `fuseport <command> --help` explains a command\n"
    "\n"
    "examples:\n"
    "  fuseport list\n"
    "  fuseport check --backend opencl --op softmax,layernorm\n"
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
  fprintf(stderr, "fuseport: unknown command '%s'\n\n%s", cmd, usage);
  return FP_EXIT_USAGE;
}
