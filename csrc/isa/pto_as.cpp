// PTO-AS: the text form of PTO programs.
//
//   buffer %0 input 256
//   buffer %1 output 256
//   tadd %1:f32[4,16;16,1]@0, %0:f32[4,16;16,1]@0, %0:f32[4,16;0,1]@0 alpha=1
//
// One declaration or instruction per line; '#' starts a comment. An operand is
// %buffer:dtype[shape;strides]@offset (strides and offset in elements). Every
// immediate the instruction table declares follows as name=value.
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <string>

#include "program.h"

namespace pto::isa {
namespace {

constexpr std::string_view kKindNames[] = {"input", "output", "temp"};

std::string formatNumber(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

void printOperand(std::string& out, const Operand& operand) {
  out += '%';
  out += std::to_string(operand.buffer);
  out += ':';
  out += dtypeName(operand.dtype);
  out += '[';
  out += dimsText(operand.shape, operand.rank);
  out += ';';
  out += dimsText(operand.strides, operand.rank);
  out += "]@";
  out += std::to_string(operand.offset);
}

// A cursor over one line that knows its column and what it expected.
class LineParser {
 public:
  LineParser(std::string_view line, int number) : line_(line), number_(number) {}

  std::string error;

  bool atEnd() {
    skipSpace();
    return pos_ >= line_.size() || line_[pos_] == '#';
  }

  bool fail(std::string_view expected) { return failAt(pos_, expected); }

  // Fails at the start of the last word or integer read: for a token that was
  // read whole and then found wrong (an unknown mnemonic, dtype or kind, a
  // buffer number out of range or out of order).
  bool failToken(std::string_view expected) { return failAt(token_, expected); }

  bool expect(char c) {
    skipSpace();
    if (pos_ < line_.size() && line_[pos_] == c) {
      ++pos_;
      return true;
    }
    return fail(std::string("'") + c + "'");
  }

  bool accept(char c) {
    skipSpace();
    if (pos_ < line_.size() && line_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool peek(char c) {
    skipSpace();
    return pos_ < line_.size() && line_[pos_] == c;
  }

  std::string_view word() {
    skipSpace();
    const size_t start = token_ = pos_;
    while (pos_ < line_.size() && (std::isalnum(static_cast<unsigned char>(line_[pos_])) || line_[pos_] == '_')) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  // A decimal integer with an optional sign ('+' or, for signed types, '-').
  template <typename Int>
  bool integer(Int* value, std::string_view what) {
    skipSpace();
    token_ = pos_;
    const char* begin = line_.data() + pos_;
    const char* end = line_.data() + line_.size();
    const char* digits = (begin < end && *begin == '+') ? begin + 1 : begin;
    // from_chars takes a '-' itself: after a '+' there must be a digit ("+-1" is not a number).
    if (digits == end || (digits != begin && !std::isdigit(static_cast<unsigned char>(*digits)))) return fail(what);
    const auto [ptr, ec] = std::from_chars(digits, end, *value);
    if (ec != std::errc() || ptr == digits) return fail(what);
    pos_ += static_cast<size_t>(ptr - begin);
    return true;
  }

  bool number(double* value) {
    skipSpace();
    const char* begin = line_.data() + pos_;
    const auto [ptr, ec] = std::from_chars(begin, line_.data() + line_.size(), *value);
    if (ec != std::errc() || ptr == begin) return fail("a number");
    pos_ += static_cast<size_t>(ptr - begin);
    return true;
  }

  bool dims(std::array<int64_t, kMaxRank>* values, int* count, char terminator) {
    *count = 0;
    if (peek(terminator)) return true;
    do {
      if (*count == kMaxRank) return fail("at most 8 dimensions");
      if (!integer(&(*values)[(*count)++], "an integer")) return false;
    } while (accept(','));
    return true;
  }

  bool operand(Operand* operand) {
    int64_t buffer = 0;
    if (!expect('%') || !integer(&buffer, "a buffer number")) return false;
    if (buffer < 0 || buffer > INT32_MAX) return failToken("a buffer number");
    operand->buffer = static_cast<int32_t>(buffer);
    if (!expect(':')) return false;
    const auto dtype = parseDType(word());
    if (!dtype) return failToken("a dtype (f32, f16, bf16, f64, i8, i16, i32, i64, u8, bool)");
    operand->dtype = *dtype;
    int rank = 0, stride_count = 0;
    if (!expect('[') || !dims(&operand->shape, &rank, ';') || !expect(';')) return false;
    if (!dims(&operand->strides, &stride_count, ']')) return false;
    if (stride_count != rank) return fail("as many strides as sizes");
    operand->rank = rank;
    return expect(']') && expect('@') && integer(&operand->offset, "an offset");
  }

 private:
  bool failAt(size_t column, std::string_view expected) {
    if (error.empty()) {
      error = "line " + std::to_string(number_) + ", column " + std::to_string(column + 1) +
              ": expected " + std::string(expected);
    }
    return false;
  }

  void skipSpace() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\r')) ++pos_;
  }

  std::string_view line_;
  int number_;
  size_t pos_ = 0;
  size_t token_ = 0;  // where the last word or integer starts
};

bool parseBuffer(LineParser& in, Program& program) {
  int64_t id = 0;
  if (!in.expect('%') || !in.integer(&id, "a buffer number")) return false;
  if (id != static_cast<int64_t>(program.buffers.size())) {
    return in.failToken("buffer %" + std::to_string(program.buffers.size()) + " (buffers are numbered in order)");
  }
  Buffer buffer;
  const std::string_view kind = in.word();
  size_t k = 0;
  while (k < std::size(kKindNames) && kKindNames[k] != kind) ++k;
  if (k == std::size(kKindNames)) return in.failToken("a buffer kind (input, output, temp)");
  buffer.kind = static_cast<BufferKind>(k);
  // The whole uint64 range, as print() writes it.
  if (in.peek('-')) return in.fail("a non-negative size in bytes");
  if (!in.integer(&buffer.bytes, "a size in bytes")) return false;
  program.buffers.push_back(buffer);
  return true;
}

bool parseInstruction(LineParser& in, std::string_view mnemonic, Program& program) {
  const auto opcode = opcodeByName(mnemonic);
  if (!opcode) return in.failToken("an instruction or 'buffer', not '" + std::string(mnemonic) + "'");
  const InstructionInfo& entry = info(*opcode);
  Instruction instruction;
  instruction.opcode = *opcode;
  for (int i = 0; i <= entry.inputs; ++i) {
    if (i > 0 && !in.expect(',')) return false;
    instruction.operands.emplace_back();
    if (!in.operand(&instruction.operands.back())) return false;
  }
  for (int i = 0; i < entry.immediateCount(); ++i) {
    if (in.word() != entry.immediates[i]) return in.failToken(std::string(entry.immediates[i]) + "=");
    if (!in.expect('=') || !in.number(&instruction.immediates[i])) return false;
  }
  program.instructions.push_back(std::move(instruction));
  return true;
}

}  // namespace

std::string print(const Instruction& instruction) {
  const InstructionInfo& entry = info(instruction.opcode);
  std::string out(entry.name);
  for (size_t i = 0; i < instruction.operands.size(); ++i) {
    out += i ? ", " : " ";
    printOperand(out, instruction.operands[i]);
  }
  for (int i = 0; i < entry.immediateCount(); ++i) {
    out += ' ';
    out += entry.immediates[i];
    out += '=';
    out += formatNumber(instruction.immediates[i]);
  }
  return out;
}

std::string_view kindName(BufferKind kind) { return kKindNames[static_cast<int>(kind)]; }

std::string dimsText(const std::array<int64_t, kMaxRank>& values, int count) {
  std::string text;
  for (int d = 0; d < count; ++d) {
    if (d > 0) text += ',';
    text += std::to_string(values[d]);
  }
  return text;
}

std::string print(size_t index, const Buffer& buffer) {
  return "buffer %" + std::to_string(index) + " " + std::string(kindName(buffer.kind)) + " " +
         std::to_string(buffer.bytes);
}

std::string print(const Program& program) {
  std::string out;
  for (size_t i = 0; i < program.buffers.size(); ++i) out += print(i, program.buffers[i]) + "\n";
  for (const Instruction& instruction : program.instructions) out += print(instruction) + "\n";
  return out;
}

ParseResult parse(std::string_view text) {
  ParseResult result;
  int number = 0;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    LineParser in(line, ++number);
    if (in.atEnd()) continue;
    const std::string_view head = in.word();
    const bool ok = head == "buffer" ? parseBuffer(in, result.program)
                                     : parseInstruction(in, head, result.program);
    if (ok && !in.atEnd()) in.fail("the end of the line");
    if (!in.error.empty()) {
      result.error = in.error;
      return result;
    }
  }
  return result;
}

}  // namespace pto::isa
