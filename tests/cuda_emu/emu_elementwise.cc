/* kernels/cu/elementwise.cu, compiled for the CPU emulation (cuda_emu.h). */
#include "../../kernels/cu/elementwise.cu"
