"""pto's oneDNN (3.2, PyPI's onednn-cpu-gomp: cmake/onednn.cmake), loaded apart from torch's."""

import ctypes
import importlib.metadata


def load_onednn_apart_from_torch() -> None:
    """Loads libdnnl.so.3 on its own, before _C, which needs it.

    torch links its oneDNN (3.12) into libtorch_cpu.so and exports a few C++ template
    instances both copies define: the vtables of std::__future_base::_Result<...> over
    oneDNN's cache entries, whose layouts differ between the versions (the kernel
    cache's _Result keeps its flag at byte 48 in 3.2, at byte 40 in torch's). Loaded as
    _C's dependency, libdnnl would bind those names in the order of _C's libraries,
    libtorch_cpu.so first, and run torch's destructors on its own objects. Loaded first
    and on its own (RTLD_LOCAL), it binds every name it defines to itself; _C then finds
    it loaded. tests/python/test_convolution.py checks the bindings.
    """
    library = next(f for f in importlib.metadata.files("onednn-cpu-gomp") if f.name == "libdnnl.so.3")
    ctypes.CDLL(str(library.locate().resolve()), mode=ctypes.RTLD_LOCAL)
