// PTO programs: instructions over numbered buffers, each operand a strided view
// (dtype, shape, strides, offset) of the memory a buffer stands for.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "instructions.h"

namespace pto::isa {

constexpr int kMaxRank = 8;

struct Operand {
  int32_t buffer = 0;
  DType dtype = DType::kFloat32;
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> strides{};  // in elements; 0 repeats (broadcast)
  int64_t offset = 0;                        // in elements, from the buffer's start

  int64_t numel() const;
  bool operator==(const Operand&) const = default;
};

struct Instruction {
  Opcode opcode = Opcode::kMove;
  std::vector<Operand> operands;  // the output first, then the inputs
  std::array<double, kMaxImmediates> immediates{};

  bool operator==(const Instruction&) const = default;
};

enum class BufferKind : uint8_t { kInput, kOutput, kTemp };
std::string_view kindName(BufferKind kind);  // "input", as PTO-AS spells it

struct Buffer {
  BufferKind kind = BufferKind::kInput;
  uint64_t bytes = 0;
  bool operator==(const Buffer&) const = default;
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<Instruction> instructions;
  bool operator==(const Program&) const = default;
};

// A contiguous operand of `shape` over the start of `buffer`.
Operand contiguousOperand(int32_t buffer, DType dtype, std::initializer_list<int64_t> shape);

// The one-instruction program of `instruction` (an eager op): each buffer an
// operand refers to is declared as large as the operands reach into it, the
// output's an output, the rest inputs.
Program programOf(Instruction instruction);

// Checks a program against the instruction table: operand counts, dtypes,
// shapes, immediates, and that every operand stays inside its buffer.
// Returns "" when valid, else what is wrong and where ("instruction 2 (tadd): ...").
std::string verify(const Program& program);

// Checks one instruction whose buffers have the given sizes in bytes.
std::string verifyInstruction(const Instruction& instruction, std::span<const uint64_t> buffer_bytes);

// PTO-AS, the text form of a program. print(parse(text)) == text for every
// printed program; parse errors name the line and column and what was expected.
std::string print(const Program& program);
std::string print(const Instruction& instruction);
std::string print(size_t index, const Buffer& buffer);  // the declaration of buffer %index
// The first `count` values as PTO-AS writes a shape or strides: "4,16".
std::string dimsText(const std::array<int64_t, kMaxRank>& values, int count);

struct ParseResult {
  Program program;
  std::string error;  // "" on success, else "line L, column C: expected ..."
};
ParseResult parse(std::string_view text);

}  // namespace pto::isa
