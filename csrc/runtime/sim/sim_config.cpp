#include "sim_config.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace pto::rt::sim {

std::optional<size_t> parseByteSize(std::string_view text) {
  size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string suffix(end, text.data() + text.size());
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.ends_with("IB")) suffix.resize(suffix.size() - 2);
  else if (suffix.size() > 1 && suffix.ends_with("B")) suffix.resize(suffix.size() - 1);
  int shift = 0;
  if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  else if (!suffix.empty() && suffix != "B") return std::nullopt;
  if (shift > 0 && value > (SIZE_MAX >> shift)) return std::nullopt;
  return value << shift;
}

SimConfig readSimConfig() {
  SimConfig config;
  if (const char* devices = std::getenv("PTO_SIM_DEVICES")) {
    int32_t count = 0;
    const std::string_view text(devices);
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (ec != std::errc() || end != text.data() + text.size() || count < 1 || count > 64) {
      throw std::invalid_argument(std::string("PTO_SIM_DEVICES='") + devices +
                                  "' is not a device count between 1 and 64");
    }
    config.device_count = count;
  }
  if (const char* memory = std::getenv("PTO_SIM_MEMORY")) {
    const auto capacity = parseByteSize(memory);
    if (!capacity || *capacity == 0) {
      throw std::invalid_argument(std::string("PTO_SIM_MEMORY='") + memory +
                                  "' is not a memory size such as 512M or 16G");
    }
    config.memory_capacity = *capacity;
  }
  if (const char* faults = std::getenv("PTO_SIM_FAULTS")) config.faults = parseFaultPlan(faults);
  if (const char* strict = std::getenv("PTO_SIM_STRICT")) {
    const std::string_view text(strict);
    if (text != "0" && text != "1") {
      throw std::invalid_argument(std::string("PTO_SIM_STRICT='") + strict + "' is not 0 or 1");
    }
    config.strict = text == "1";
  }
  if (const char* isa = std::getenv("PTO_SIM_VECTOR_ISA")) {
    config.vector_isa_cap = kernels::parseVectorIsa(isa);
    if (!config.vector_isa_cap) {
      throw std::invalid_argument(std::string("PTO_SIM_VECTOR_ISA='") + isa +
                                  "' is not one of avx512, avx2, sse4, scalar");
    }
  }
  return config;
}

}  // namespace pto::rt::sim
