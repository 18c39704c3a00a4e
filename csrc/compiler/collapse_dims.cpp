#include <vector>

#include "passes.h"
#include "isa/tiling.h"

namespace pto::compiler {
namespace {

// Whether dimensions d and d + 1 of the operand may become one, and the stride it
// would have: the outer one steps over the inner one exactly (a contiguous run, or
// both repeated with stride 0), or one of them has extent 1.
bool mergeable(const isa::Operand& operand, int d, int64_t* stride) {
  const int64_t outer = operand.strides[d], inner = operand.strides[d + 1];
  if (operand.shape[d + 1] == 1) return *stride = outer, true;
  if (operand.shape[d] == 1 || outer == inner * operand.shape[d + 1]) return *stride = inner, true;
  return false;
}

// A reduction keeps its reduced dimensions apart from the kept ones.
bool sameReduction(const isa::Instruction& instruction, int d) {
  if (!isa::info(instruction.opcode).has(isa::Property::Reduction)) return true;
  const isa::Operand& out = instruction.operands[0];
  const bool outer = out.strides[d] == 0 && out.shape[d] > 1, inner = out.strides[d + 1] == 0 && out.shape[d + 1] > 1;
  return outer == inner || out.shape[d] == 1 || out.shape[d + 1] == 1;
}

// What may run by tiles and has operands of the output's shape, so that a dimension
// merges alike in all of them (not a GEMM: its operands' shapes follow their own rule).
bool collapsible(const isa::Instruction& instruction) {
  return isa::fusable(instruction) && isa::info(instruction.opcode).has(isa::Property::SameShape);
}

}  // namespace

int collapseLeadingDims(isa::Program& program) {
  int collapsed = 0;
  for (isa::Instruction& instruction : program.instructions) {
    if (!collapsible(instruction)) continue;
    // Never the last dimension: the row ops work along it, and a GEMM's output rows
    // (the dimension before it) are what a fused stage tiles over.
    for (int d = 0; d + 2 < instruction.operands[0].rank;) {
      std::vector<int64_t> strides(instruction.operands.size());
      bool all = sameReduction(instruction, d);
      for (size_t k = 0; all && k < instruction.operands.size(); ++k) {
        all = mergeable(instruction.operands[k], d, &strides[k]);
      }
      if (!all) {
        ++d;
        continue;
      }
      for (size_t k = 0; k < instruction.operands.size(); ++k) {
        isa::Operand& operand = instruction.operands[k];
        operand.shape[d] *= operand.shape[d + 1];
        operand.strides[d] = strides[k];
        for (int e = d + 1; e + 1 < operand.rank; ++e) {
          operand.shape[e] = operand.shape[e + 1];
          operand.strides[e] = operand.strides[e + 1];
        }
        operand.shape[operand.rank - 1] = 0;
        operand.strides[operand.rank - 1] = 0;
        --operand.rank;
      }
      ++collapsed;
    }
  }
  return collapsed;
}

}  // namespace pto::compiler
