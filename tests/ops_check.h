/* fuseport tests: the op checks that test_ops.c runs on its backend
 * (fp_env.ctx), defined in ops_check.c. */
#ifndef FUSEPORT_TESTS_OPS_CHECK_H
#define FUSEPORT_TESTS_OPS_CHECK_H

#include <stdint.h>

#include "op.h"

/* Runs p with variant v on fresh random inputs and poisoned outputs, and
 * asserts the reference check and the kernel and library-call counts of the
 * cost model; a variant the backend cannot run passes only where that is
 * expected (a vendor library it lacks, a type its GEMM library lacks). */
void check_case(const fp_problem *p, const fp_variant *v);

/* Every variant, every boolean/choice combination, every one of the shapes
 * (n_shapes shapes of the op's rank, flattened). */
void check_op_grid(const fp_op *op, const int64_t *shapes, int n_shapes);

/* The same for 2-D shapes. */
void check_op_shapes(const fp_op *op, const int64_t (*shapes)[2], int n_shapes);

#endif
