"""pypto_torch: PyTorch on a PTO device.

Importing this package (or just ``import torch``, through the ``torch.backends``
entry point) registers the ``pto`` device: ``torch.randn(3, device="pto")``,
``tensor.to("pto")``, ``torch.pto.*``, autograd and ``torch.accelerator``.
"""


def _autoload() -> None:
    """Entry point of ``torch.backends``: importing this package is the registration.

    Defined before ``import torch``: when this package is imported first, importing
    torch runs its backend autoload, which looks this function up on the package
    while the package is still initialising.
    """


import atexit  # noqa: E402

import torch  # noqa: E402

from pypto_torch._host_math import choose_mkl_vml_code_path  # noqa: E402

choose_mkl_vml_code_path()

from pypto_torch._onednn import load_onednn_apart_from_torch  # noqa: E402

load_onednn_apart_from_torch()

from pypto_torch import _C  # noqa: E402  (loading it registers kernels, allocators, guard, hooks)
from pypto_torch import api, pto  # noqa: E402
from pypto_torch.api import (  # noqa: E402  (the seed-style pypto API: pypto.exp, pypto.Context ...)
    Context,
    add,
    arange,
    as_dtype,
    conv2d,
    current_device,
    div,
    empty,
    empty_cache,
    exp,
    from_numpy,
    from_torch,
    full,
    gelu,
    layer_norm,
    layout_of,
    log,
    matmul,
    memory_allocated,
    mul,
    normalize,
    ones,
    ones_like,
    rand,
    randn,
    randn_like,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_sum,
    relu,
    rms_norm,
    set_device,
    softmax,
    sub,
    synchronize,
    tensor,
    to_numpy,
    to_torch,
    transpose,
    zeros,
    zeros_like,
)
from pypto_torch.kernel import CompileError, asm, asm_kernel, jit, kernel  # noqa: E402
from pypto_torch.profiler import Profiler  # noqa: E402
from pypto_torch._fallback import (  # noqa: E402
    fallback_mode,
    fallback_ops,
    quiet_tensor_printing,
    set_fallback_mode,
)

if torch._C._get_privateuse1_backend_name() != "pto":
    torch.utils.rename_privateuse1_backend("pto")
    torch._register_device_module("pto", pto)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    quiet_tensor_printing(torch)

from pypto_torch import distributed, sharing  # noqa: E402

distributed.register()
sharing.register()
# Before finalisation, torch's autograd threads of the pto devices finish their tasks
# while they can still take the GIL (csrc/torch/autograd_exit.h).
atexit.register(_C._settle_autograd_device_threads)

__all__ = [
    *api.__all__,  # the seed-style pypto API (pypto.exp, pypto.Context ...)
    "kernel", "jit", "asm", "asm_kernel", "CompileError", "Profiler",
    "explain",
    "fallback_mode",
    "fallback_ops",
    "set_fallback_mode",
    "pto",
]


def __getattr__(name: str):
    # The compiler front end imports torch._dynamo: load it when first asked for,
    # not on every `import torch` (which imports this package through autoload).
    if name == "explain":
        from pypto_torch.compile import explain

        return explain
    raise AttributeError(f"module 'pypto_torch' has no attribute {name!r}")
