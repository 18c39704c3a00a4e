# Finds the installed torch the way its own extensions do: the CMake package
# under torch.utils.cmake_prefix_path, giving include paths, the C++ ABI and flags.
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module)
# Autoloading is off here: an installed, stale pypto_torch must not break the build.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 ${Python3_EXECUTABLE} -c "import torch, os; print(torch.utils.cmake_prefix_path); print(os.path.dirname(torch.__file__))"
  OUTPUT_VARIABLE _torch_paths OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
string(REPLACE "\n" ";" _torch_paths "${_torch_paths}")
list(GET _torch_paths 0 _torch_cmake_prefix)
list(GET _torch_paths 1 TORCH_PACKAGE_DIR)
list(APPEND CMAKE_PREFIX_PATH "${_torch_cmake_prefix}")
# torch's config looks for CUDA/MKL pieces it does not need for a CPU build.
set(CAFFE2_USE_CUDNN OFF)
find_package(Torch REQUIRED)
# Torch's CMake adds the whole flag set to TORCH_CXX_FLAGS (ABI define included).
set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} ${TORCH_CXX_FLAGS}")
find_library(TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_PACKAGE_DIR}/lib" REQUIRED NO_DEFAULT_PATH)
