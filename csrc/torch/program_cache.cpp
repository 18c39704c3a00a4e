#include "program_cache.h"

#include <cstring>
#include <list>
#include <memory>
#include <unordered_map>

#include "device.h"
#include "isa/schedule.h"
#include "pto_check.h"
#include "runtime/program.h"

namespace pto::torch_glue {
namespace {

// A training step touches a few hundred distinct instructions; past this many
// the least recently launched is released.
constexpr size_t kCapacity = 2048;

struct Key {
  c10::DeviceIndex device;
  isa::Instruction instruction;
};

// A key by reference: a lookup that hits copies no instruction (an allocation).
struct KeyRef {
  c10::DeviceIndex device;
  const isa::Instruction& instruction;
};

KeyRef refOf(const Key& key) { return {key.device, key.instruction}; }
KeyRef refOf(const KeyRef& key) { return key; }

void mix(size_t& seed, uint64_t value) { seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

struct KeyHash {
  using is_transparent = void;

  size_t operator()(const auto& any_key) const {
    const KeyRef key = refOf(any_key);
    size_t seed = static_cast<size_t>(key.instruction.opcode) * 131 + static_cast<size_t>(key.device);
    for (double immediate : key.instruction.immediates) {
      uint64_t bits;
      std::memcpy(&bits, &immediate, sizeof bits);
      mix(seed, bits);
    }
    for (const isa::Operand& operand : key.instruction.operands) {
      mix(seed, (static_cast<uint64_t>(operand.buffer) << 40) ^ (static_cast<uint64_t>(operand.dtype) << 32) ^
                    static_cast<uint64_t>(operand.rank));
      mix(seed, static_cast<uint64_t>(operand.offset));
      for (int d = 0; d < operand.rank; ++d) {
        mix(seed, static_cast<uint64_t>(operand.shape[d]));
        mix(seed, static_cast<uint64_t>(operand.strides[d]));
      }
    }
    return seed;
  }
};

// Immediates compare by their bits, so that a NaN fill value finds its program.
struct KeyEqual {
  using is_transparent = void;

  bool operator()(const auto& any_a, const auto& any_b) const {
    const KeyRef a = refOf(any_a), b = refOf(any_b);
    return a.device == b.device && a.instruction.opcode == b.instruction.opcode &&
           std::memcmp(a.instruction.immediates.data(), b.instruction.immediates.data(),
                       sizeof a.instruction.immediates) == 0 &&
           a.instruction.operands == b.instruction.operands;
  }
};

// Per thread, so that a lookup takes no lock; released when the thread ends.
class ProgramCache {
 public:
  ~ProgramCache() {
    for (auto& [key, program] : order_) ptoProgramRelease(program);
  }

  ptoProgram get(const isa::Instruction& instruction, c10::DeviceIndex device) {
    if (auto hit = index_.find(KeyRef{device, instruction}); hit != index_.end()) {
      order_.splice(order_.begin(), order_, hit->second);
      return hit->second->second;
    }
    ptoProgram program = load(instruction, device);
    order_.emplace_front(Key{device, instruction}, program);
    index_.emplace(order_.front().first, order_.begin());
    if (order_.size() > kCapacity) {
      index_.erase(order_.back().first);
      ptoProgramRelease(order_.back().second);  // launches already queued still run
      order_.pop_back();
    }
    return program;
  }

 private:
  static ptoProgram load(const isa::Instruction& instruction, c10::DeviceIndex device) {
    const c10::DeviceIndex previous = currentDevice();
    if (previous != device) setCurrentDevice(device);
    auto scheduled = std::make_shared<const isa::ScheduledProgram>(isa::scheduleInOrder(isa::programOf(instruction)));
    ptoProgram program = nullptr;
    const ptoError status = rt::loadProgram(std::move(scheduled), &program);
    if (previous != device) setCurrentDevice(previous);
    PTO_CHECK(status);
    return program;
  }

  std::list<std::pair<Key, ptoProgram>> order_;  // most recently launched first
  std::unordered_map<Key, std::list<std::pair<Key, ptoProgram>>::iterator, KeyHash, KeyEqual> index_;
};

}  // namespace

ptoProgram loadedProgram(const isa::Instruction& instruction, c10::DeviceIndex device) {
  thread_local ProgramCache cache;
  return cache.get(instruction, device);
}

}  // namespace pto::torch_glue
