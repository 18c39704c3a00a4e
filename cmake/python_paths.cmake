# Paths that only this Python knows (where pip put a wheel's files): python_paths(VAR CODE
# WHAT) runs CODE, which prints one path a line, and sets VAR to their list; it stops the
# configure, naming WHAT, where that fails (a package not installed). torch's device
# backends are not loaded there (TORCH_DEVICE_BACKEND_AUTOLOAD=0, as cmake/torch.cmake
# asks): an installed pypto_torch whose tree has no _C yet (an editable install of this
# clone before its first build) would make `import torch` fail.
find_package(Python3 REQUIRED COMPONENTS Interpreter)

function(python_paths var code what)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 ${Python3_EXECUTABLE} -c "${code}"
                  OUTPUT_VARIABLE paths OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "${what} not found for ${Python3_EXECUTABLE}: run scripts/install-deps.sh "
                        "(pip installs it from requirements.txt)")
  endif()
  string(REPLACE "\n" ";" paths "${paths}")
  set(${var} ${paths} PARENT_SCOPE)
endfunction()
