/* kernels/cu/reduce.cu, compiled for the CPU emulation (cuda_emu.h). */
#include "../../kernels/cu/reduce.cu"
