/* kernels/cu/horizontal.cu, compiled for the CPU emulation (cuda_emu.h). */
#include "../../kernels/cu/horizontal.cu"
