/* fuseport tests: what the CUDA ROWS planner's tests (test_cuda_plan.c,
 * test_cuda_plan_blocks.c) share; defined in cuda_plan_cases.c. */
#ifndef FUSEPORT_TESTS_CUDA_PLAN_CASES_H
#define FUSEPORT_TESTS_CUDA_PLAN_CASES_H

#include "cuda_plan.h"

enum { H100_SMS = 132, HOST_CAP = 1 << 20 };

/* The offers of the row kernels (see cuda_plan_cases.c for each). */
extern const fp_rows_builds reduce_offer;
extern const fp_rows_builds reduce_offer_k4;
extern const fp_rows_builds backward_offer;
extern const fp_rows_builds softmax_offer;
extern const fp_rows_builds layernorm_offer;
extern const fp_rows_builds layernorm_half_offer;
extern const fp_rows_builds double_softmax_half_offer;
extern const fp_rows_builds layernorm_l1_offer;
extern const fp_rows_builds double_softmax_l1_offer;
extern const fp_rows_builds layernorm_offer_no_stream;
extern const fp_rows_builds hreduce_offer;
extern const fp_rows_builds hreduce_pointwise_offer;

void host_request(int64_t M, int64_t N, uint32_t *groups, uint32_t *block);
fp_rows_plan plan_for(fp_rows_policy policy, const fp_rows_builds *b, int64_t M, int64_t N, int cc);
fp_rows_plan plan_portable(const fp_rows_builds *b, int64_t M, int64_t N);
void assert_preconditions(const fp_rows_builds *b, int64_t M, int64_t N, int cc, fp_rows_plan p);
fp_rows_builds with_cluster_smem(fp_rows_builds b, int arrays);

#endif
