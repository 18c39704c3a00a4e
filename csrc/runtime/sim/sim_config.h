// Configuration of the simulated device, read once from the environment:
//   PTO_SIM_DEVICES  number of devices (default 2)
//   PTO_SIM_MEMORY   capacity of each device, e.g. 512M, 16G (default 16G)
//   PTO_SIM_FAULTS   calls to fail on purpose, e.g. launch:3,malloc:2 (sim_faults.h)
//   PTO_SIM_STRICT   1: host code cannot touch device memory (sim_memory.h) (default 0)
//   PTO_SIM_VECTOR_ISA  the widest vector ISA the kernels may use: avx512, avx2, sse4
//                    or scalar (default: the best the host has; kernels/vector_target.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/vector_target.h"
#include "sim_faults.h"

namespace pto::rt::sim {

struct SimConfig {
  int32_t device_count = 2;
  size_t memory_capacity = size_t{16} << 30;
  FaultPlan faults;
  bool strict = false;
  std::optional<kernels::VectorIsa> vector_isa_cap;
};

// Parses "1048576", "512K", "512M", "16G", "1T" (an optional trailing "B" or "iB").
std::optional<size_t> parseByteSize(std::string_view text);

// Throws std::invalid_argument naming the variable when a value does not parse.
SimConfig readSimConfig();

}  // namespace pto::rt::sim
