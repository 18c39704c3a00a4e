// The driver registry: the drivers registered from static initialisers, starting
// one at the first runtime call, draining its devices at exit and refusing its use
// in a child forked after it started.
#include "driver_registry.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "error.h"

namespace pto::rt {
namespace {

// Set in a child forked after the driver started: fork copies the driver's
// state but none of its threads (stream workers, device cores), so the child
// cannot use it, as a CUDA context cannot be used after fork.
std::atomic<pid_t> forked_from{0};
pid_t driver_pid = 0;

void markForkedChild() { forked_from.store(driver_pid); }

struct RegisteredDriver {
  std::string name;
  int priority;
  DriverFactory factory;
};

// Filled by the drivers' static initialisers, read at the first runtime call.
std::vector<RegisteredDriver>& registeredDrivers() {
  static std::vector<RegisteredDriver> drivers;
  return drivers;
}

// PTO_DRIVER's driver, else the registered one of highest priority that starts.
Driver* startDriver(const char* requested, std::string* why) {
  std::vector<RegisteredDriver> candidates = registeredDrivers();
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const RegisteredDriver& a, const RegisteredDriver& b) { return a.priority > b.priority; });
  std::string names;
  for (const RegisteredDriver& candidate : candidates) names += (names.empty() ? "'" : ", '") + candidate.name + "'";
  if (candidates.empty()) {
    *why = "this build has no pto driver";
    return nullptr;
  }
  for (const RegisteredDriver& candidate : candidates) {
    if (requested != nullptr && candidate.name != requested) continue;
    try {
      return candidate.factory().release();
    } catch (const std::exception& error) {
      *why += (why->empty() ? "" : "; ") + candidate.name + " driver: " + error.what();
    }
  }
  if (requested != nullptr && why->empty()) {
    *why = std::string("PTO_DRIVER=") + requested + " is not available: this build has " + names;
  }
  return nullptr;
}

// Exiting with work queued is clean, as with CUDA: before the host libraries the
// kernels call (oneDNN, MKL) run their destructors, every device finishes its
// queued work. Registered once the driver exists, so it runs before the
// destructors of everything constructed earlier. Errors are dropped: no one is
// left to report them to.
void drainAtExit() {
  if (forked_from.load() != 0) return;  // a forked child has no workers to wait for
  ptoError status = PTO_SUCCESS;
  Driver* driver = driverOrNull(&status);
  if (driver == nullptr) return;
  for (int32_t device = 0; device < driver->deviceCount(); ++device) driver->synchronizeDevice(device);
}

}  // namespace

Driver* driverOrNull(ptoError* status) {
  if (const pid_t parent = forked_from.load(); parent != 0) {
    *status = failf(PTO_ERROR_NOT_INITIALIZED,
                    "the pto device cannot be used in a process forked after the device started "
                    "in its parent (pid ", parent, "); start child processes with the 'spawn' "
                    "or 'forkserver' method of multiprocessing, as with CUDA");
    return nullptr;
  }
  // Leaked on purpose: worker threads and memory live until process exit, as a
  // device driver's state does, so no static destructor races a late free.
  static std::string init_error;
  static Driver* driver = []() -> Driver* {
    Driver* made = startDriver(std::getenv("PTO_DRIVER"), &init_error);
    if (made != nullptr) {
      driver_pid = getpid();
      pthread_atfork(nullptr, nullptr, &markForkedChild);
      std::atexit(&drainAtExit);
    }
    return made;
  }();
  if (driver == nullptr) *status = fail(PTO_ERROR_NOT_INITIALIZED, init_error);
  return driver;
}

bool registerDriver(const char* name, int priority, DriverFactory factory) {
  registeredDrivers().push_back({name, priority, factory});
  return true;
}

}  // namespace pto::rt
