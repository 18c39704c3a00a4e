# Intel's MKL for tmatmul's GEMMs (csrc/runtime/sim/kernels/gemm_mkl.cpp) and the erf/erfc
# rows (vector_math_mkl.cpp), from PyPI's
# mkl-static and mkl-include (requirements.txt): the sequential static libraries,
# which choose their kernels for the CPU at run time (AVX2, AVX-512, AMX;
# MKL_ENABLE_INSTRUCTIONS caps them) and start no threads of their own.
#
# PyTorch links another MKL into libtorch_cpu.so and exports its names (cblas_sgemm,
# cblas_gemm_bf16bf16f32, the mkl_serv_* internals), so a second MKL linked or loaded
# the usual way would have its calls, even its internal ones, bound to torch's copy.
# Here the wrappers and the MKL objects they need are linked into one relocatable
# object (ld -r), in which every symbol but the wrappers' (namespace pto) is then made
# local (objcopy): the sim's calls into MKL, and MKL's into itself, are resolved inside
# that object and nothing can interpose them. tests/python/test_matmul.py
# (test_pto_and_torch_gemm_libraries_run_side_by_side) runs both MKLs in one process.

# The wheels' files, wherever pip put them for this Python (system, venv or --user).
include(cmake/python_paths.cmake)
python_paths(mkl_dirs [=[
import importlib.metadata as m
def find(package, name):
    return next(str(f.locate().resolve().parent) for f in m.files(package) if f.name == name)
print(find("mkl-static", "libmkl_core.a"))
print(find("mkl-include", "mkl.h"))
]=] "MKL (mkl-static, mkl-include)")
list(GET mkl_dirs 0 MKL_LIBRARY_DIR)
list(GET mkl_dirs 1 MKL_INCLUDE_DIR)
message(STATUS "MKL (static, sequential): ${MKL_LIBRARY_DIR}")

add_library(pto_mkl_wrappers OBJECT csrc/runtime/sim/kernels/gemm_mkl.cpp
                                   csrc/runtime/sim/kernels/vector_math_mkl.cpp)
target_include_directories(pto_mkl_wrappers PRIVATE ${MKL_INCLUDE_DIR} ${CMAKE_SOURCE_DIR}/csrc)
set_target_properties(pto_mkl_wrappers PROPERTIES POSITION_INDEPENDENT_CODE ON)

set(mkl_isolated ${CMAKE_BINARY_DIR}/libpto_mkl.a)
set(mkl_archives ${MKL_LIBRARY_DIR}/libmkl_intel_lp64.a ${MKL_LIBRARY_DIR}/libmkl_sequential.a
                 ${MKL_LIBRARY_DIR}/libmkl_core.a)
add_custom_command(
  OUTPUT ${mkl_isolated}
  COMMAND ${CMAKE_LINKER} -r -o mkl_linked.o $<TARGET_OBJECTS:pto_mkl_wrappers>
          --start-group ${mkl_archives} --end-group
  COMMAND ${CMAKE_OBJCOPY} --wildcard --keep-global-symbol=_ZN3pto* mkl_linked.o mkl_isolated.o
  COMMAND ${CMAKE_COMMAND} -E rm -f ${mkl_isolated} mkl_linked.o
  COMMAND ${CMAKE_AR} qc ${mkl_isolated} mkl_isolated.o
  DEPENDS pto_mkl_wrappers $<TARGET_OBJECTS:pto_mkl_wrappers> ${mkl_archives}
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMAND_EXPAND_LISTS
  COMMENT "Linking MKL into libpto_mkl.a with its symbols made local")
add_custom_target(pto_mkl_isolated DEPENDS ${mkl_isolated})

add_library(pto_mkl STATIC IMPORTED GLOBAL)
set_target_properties(pto_mkl PROPERTIES IMPORTED_LOCATION ${mkl_isolated})
add_dependencies(pto_mkl pto_mkl_isolated)
target_link_libraries(pto_mkl INTERFACE Threads::Threads ${CMAKE_DL_LIBS} m)
