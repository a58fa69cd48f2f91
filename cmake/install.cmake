# Install rules (included from the top-level CMakeLists.txt after every
# target exists). The public API is backend.h (contexts, buffers, kernels,
# the vendor GEMM), fp_status.h and op.h (ops, problems, plans, inputs and
# outputs); kernels.def is the kernel table backend.h expands.
include(CMakePackageConfigHelpers)

set(FP_PUBLIC_HEADERS backend/backend.h backend/fp_status.h ops/op.h kernels/kernels.def)
install(FILES ${FP_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fuseport)

set_target_properties(fuseport_lib PROPERTIES EXPORT_NAME fuseport)
# A static libfuseport drags its CUDA kernel libraries along (the package
# exports them too); a shared one holds them.
set(FP_EXPORTED fuseport_lib)
if(FUSEPORT_HAVE_CUDA)
  list(APPEND FP_EXPORTED fuseport_cuda_kernels)
  if(FUSEPORT_GEMM_SM90)
    list(APPEND FP_EXPORTED fuseport_cuda_sm90)
  endif()
endif()
install(TARGETS ${FP_EXPORTED} EXPORT fuseportTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS fuseport RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The installed command finds a shared libfuseport beside it.
set_target_properties(fuseport PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

set(FP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fuseport)
install(EXPORT fuseportTargets NAMESPACE fuseport:: DESTINATION ${FP_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/fuseportConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/fuseportConfig.cmake
                              INSTALL_DESTINATION ${FP_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/fuseportConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/fuseportConfig.cmake
              ${CMAKE_BINARY_DIR}/fuseportConfigVersion.cmake DESTINATION ${FP_CMAKE_DIR})

# pkg-config: what a plain `cc prog.c $(pkg-config --cflags --libs fuseport)`
# needs. A shared libfuseport needs only itself; a static one every library
# behind it, the C++ runtime of its CUDA kernels included.
set(FP_PC_DEPS "")
if(FUSEPORT_HAVE_CUDA)
  if(NOT FUSEPORT_SHARED)
    set(FP_PC_DEPS "-lfuseport_cuda_kernels")
    if(FUSEPORT_GEMM_SM90)
      string(APPEND FP_PC_DEPS " -lfuseport_cuda_sm90")
    endif()
  endif()
  string(APPEND FP_PC_DEPS " -L${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}")
  string(APPEND FP_PC_DEPS " -lcublasLt -lcublas -lcudart")
  if(FP_CUDNN_INCLUDE AND FP_CUDNN_LIBRARY) # the conv family's library (cuda_dnn.c)
    get_filename_component(FP_CUDNN_DIR ${FP_CUDNN_LIBRARY} DIRECTORY)
    string(APPEND FP_PC_DEPS " -L${FP_CUDNN_DIR} -lcudnn")
  endif()
endif()
if(FUSEPORT_HAVE_CLBLAST)
  string(APPEND FP_PC_DEPS " -lclblast")
endif()
if(FUSEPORT_HAVE_OPENCL)
  string(APPEND FP_PC_DEPS " -lOpenCL")
endif()
if(FUSEPORT_HAVE_CUDA AND NOT FUSEPORT_SHARED)
  string(APPEND FP_PC_DEPS " -lstdc++")
endif()
string(APPEND FP_PC_DEPS " -lm -lpthread")
if(FUSEPORT_SHARED)
  set(FP_PC_LIBS "-L\${libdir} -lfuseport")
  set(FP_PC_LIBS_PRIVATE "${FP_PC_DEPS}")
else()
  set(FP_PC_LIBS "-L\${libdir} -lfuseport ${FP_PC_DEPS}")
  set(FP_PC_LIBS_PRIVATE "")
endif()
# relocatable: the prefix is found from the .pc file's own place
file(RELATIVE_PATH FP_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${CMAKE_SOURCE_DIR}/cmake/fuseport.pc.in ${CMAKE_BINARY_DIR}/fuseport.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/fuseport.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
