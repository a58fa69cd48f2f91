/* fuseport operators, family matmul: what ops/matmul.c (the problems, the
 * variants, the descriptors) and ops/matmul_reference.c (the float64
 * reference and the tolerance) share. Private to those two files. */
#ifndef FUSEPORT_OPS_MATMUL_INTERNAL_H
#define FUSEPORT_OPS_MATMUL_INTERNAL_H

#include "ops_internal.h"

/* Parameter indices: M, N, K (P), dtype, trans_b (add). */
enum { MM_M = 0, MM_N, MM_K, MM_DTYPE, MM_TRANS, MM_ADD };
enum { B2_M = 0, B2_N, B2_K, B2_P, B2_DTYPE, B2_TRANS };
enum { ADD_BIAS = 0, ADD_FULL = 1 };

typedef enum mm_kind {
  KIND_ADD,
  KIND_RELU,
  KIND_ADD_RELU,
  KIND_B2B,
  KIND_SPLIT_ACT,
  KIND_GEGLU
} mm_kind;

/* A problem of the family, decoded. */
typedef struct mm_problem {
  mm_kind kind;
  fp_dtype dtype;
  int64_t M, N, K, P; /* P: matmul_matmul only */
  int64_t NB;         /* B's columns: N, or 2N for the paired ops */
  bool trans_b;
  bool full_add; /* matmul_add(_relu): add=full */
  int epi;       /* FP_EPI_* of the fused kernel */
} mm_problem;

/* The decoded problem of p (an op of the family). */
mm_problem fp_matmul_problem_of(const fp_problem *p);

/* fp_op.reference and fp_op.tolerance of every op of the family. */
void fp_matmul_reference(const fp_problem *p, const fp_host_tensor *in, int64_t r0, int64_t r1,
                         double *const *out);
fp_tolerance fp_matmul_tolerance(const fp_problem *p, int output);

#endif
