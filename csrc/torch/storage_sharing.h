// pto storages shared with other processes (torch.multiprocessing), as torch's
// CUDA storages are: the memory itself, by a runtime IPC handle
// (ptoIpcGetMemHandle), never a copy.
//
// The producer keeps its storage alive while a consumer has it open (the Python
// half, pypto_torch/sharing.py, holds it); each send carries a counter the
// consumer sets: its pid once it has opened the memory, 0 once its storage is
// gone and the memory closed (torch's CudaIPCSentData counters play this part).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>

namespace pto::torch_glue {

// What a consumer needs to open `storage_bytes`'s memory (a uint8 tensor over the
// whole storage): the handle of the device allocation holding it, and the
// storage's offset in that allocation. All work queued on the storage's device
// has run when it returns, so the consumer reads what the producer wrote.
std::pair<std::string, int64_t> shareStorage(const at::Tensor& storage_bytes);

// A uint8 tensor of `nbytes` over another process's storage, opened on pto:`device`
// from what shareStorage gave. `counter` is the send's int32 counter in shared host
// memory; it is set to this process's pid now and to 0 when the storage is gone.
at::Tensor openSharedStorage(int64_t device, const std::string& handle, int64_t offset_bytes, int64_t nbytes,
                             const at::Tensor& counter);

}  // namespace pto::torch_glue
