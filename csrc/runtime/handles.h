// The handles the API layer owns: a loaded program (ptoProgram) and a captured
// graph (ptoGraph), what each holds, and the registry of the live ones, so that
// a released or forged handle is refused, never dereferenced. Internal to
// csrc/runtime.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

#include "driver.h"
#include "error.h"

// A loaded program: the program (for the API's launch checks) and what the
// driver made of it.
struct ptoProgramImpl {
  int32_t device = 0;
  std::shared_ptr<const pto::isa::ScheduledProgram> program;
  std::shared_ptr<pto::rt::DeviceProgram> loaded;
};

// A captured graph: the nodes (for their programs and count) and what the driver made of them.
struct ptoGraphImpl {
  int32_t device = 0;
  std::vector<pto::rt::GraphNode> nodes;
  std::shared_ptr<pto::rt::DeviceGraph> instantiated;
};

namespace pto::rt {

// The live handles of one kind. Launches only read the set, so they share the lock.
template <class Handle>
class LiveHandles {
 public:
  explicit LiveHandles(const char* kind) : kind_(kind) {}

  void add(Handle handle) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    handles_.insert(handle);
  }
  ptoError check(Handle handle, const char* call) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (handles_.contains(handle)) return PTO_SUCCESS;
    return refuse(handle, call);
  }
  // Forgets a live handle, which the caller then deletes.
  ptoError remove(Handle handle, const char* call) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (handles_.erase(handle) != 0) return PTO_SUCCESS;
    return refuse(handle, call);
  }

 private:
  ptoError refuse(Handle handle, const char* call) const {
    return failf(PTO_ERROR_INVALID_HANDLE, call, ": ", static_cast<void*>(handle), " is not ", kind_);
  }

  const char* const kind_;
  mutable std::shared_mutex mutex_;
  std::unordered_set<Handle> handles_;
};

// Leaked, as the driver is, so that a handle released by a late destructor at
// exit still finds them.
inline LiveHandles<ptoProgram>& live_programs = *new LiveHandles<ptoProgram>("a loaded program");
inline LiveHandles<ptoGraph>& live_graphs = *new LiveHandles<ptoGraph>("a captured graph");

}  // namespace pto::rt
