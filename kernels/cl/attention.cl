/* fuseport OpenCL kernels, family attention (kernels.def): written in the next commit. */
