# oneDNN for tmatmul's bfloat16 GEMMs (csrc/runtime/sim/kernels/gemm_onednn.cpp) and the
# Conv group's convolutions (conv_onednn.cpp): oneDNN 3.2, the CPU-only GNU-OpenMP build
# of PyPI's onednn-cpu-gomp (requirements.txt), linked dynamically with its directory as
# the RPATH. Debian 12's oneDNN is 2.6, whose AMX convolution kernels read past a heap
# buffer when their primitive is created and whose bfloat16 GEMMs reach 0.68 of torch's
# (oneDNN 3.12) GFLOP/s at 2048^2 on an AMX Xeon, where 3.2 reaches 0.79 in the device's
# row bands (0.84 running the whole GEMM on two OpenMP threads).
#
# The wheel has no headers: those of torch's own oneDNN (3.12) are used. oneDNN's C API
# keeps backward compatibility within a major version, so calls written against newer
# 3.x headers run on 3.2 as long as they name only what 3.2 has (a call it lacks fails to
# link). They are reached through a folder of the build tree holding only `oneapi`, so
# that torch's other headers (its own sleef.h among them) cannot shadow the system's.
#
# torch links its oneDNN into libtorch_cpu.so but exports none of its C API (dnnl_*), so
# the sim's calls bind to this library; it exports a few C++ template instances that
# libdnnl must not bind to, which pypto_torch/_onednn.py sees to. tests/python/
# test_convolution.py checks the bindings and runs both copies in one process.

include(cmake/python_paths.cmake)
python_paths(onednn_paths [=[
import importlib.metadata as m, os, torch
print(next(str(f.locate().resolve()) for f in m.files("onednn-cpu-gomp") if f.name == "libdnnl.so.3"))
print(os.path.join(os.path.dirname(torch.__file__), "include"))
]=] "oneDNN (onednn-cpu-gomp) or torch's headers")
list(GET onednn_paths 0 DNNL_LIBRARY)
list(GET onednn_paths 1 torch_include_dir)
if(NOT EXISTS ${torch_include_dir}/oneapi/dnnl/dnnl.hpp)
  message(FATAL_ERROR "torch's oneDNN headers not found in ${torch_include_dir}/oneapi")
endif()
set(DNNL_INCLUDE_DIR ${CMAKE_BINARY_DIR}/onednn_include)
file(MAKE_DIRECTORY ${DNNL_INCLUDE_DIR})
file(CREATE_LINK ${torch_include_dir}/oneapi ${DNNL_INCLUDE_DIR}/oneapi SYMBOLIC)
message(STATUS "oneDNN: ${DNNL_LIBRARY}, headers from ${torch_include_dir}/oneapi")
