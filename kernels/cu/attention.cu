/* fuseport CUDA kernels, family attention (kernels.def): written in a later
 * commit; until then the family's kernels report unavailable on CUDA. */
#include "cuda/cuda_kernels.h"

extern "C" void fp_cuda_register_attention(const void *table[FPK_COUNT]) { (void)table; }

extern "C" void fp_cuda_register_tuning_attention(fp_cuda_tuning table[FPK_COUNT]) {
  (void)table;
}
