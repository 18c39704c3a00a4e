#include "distributed/reductions.h"

namespace pto::distributed {
namespace {

bool isBitwise(c10d::ReduceOp::RedOpType op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

// PREMUL_SUM's factor, as a scalar or a one-element tensor.
at::Tensor scaled(const at::Tensor& rows, const c10d::ReduceOp& op) {
  const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "pccl: PREMUL_SUM without a factor");
  if (supplement->tensor_factor.defined()) return rows * supplement->tensor_factor.to(rows.device(), rows.scalar_type());
  return rows * supplement->double_factor;
}

}  // namespace

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "sum";
    case c10d::ReduceOp::AVG: return "avg";
    case c10d::ReduceOp::PRODUCT: return "product";
    case c10d::ReduceOp::MIN: return "min";
    case c10d::ReduceOp::MAX: return "max";
    case c10d::ReduceOp::BAND: return "band";
    case c10d::ReduceOp::BOR: return "bor";
    case c10d::ReduceOp::BXOR: return "bxor";
    case c10d::ReduceOp::PREMUL_SUM: return "premul_sum";
    default: return "unused";
  }
}

void checkReduceOp(const char* collective, const c10d::ReduceOp& op, const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& tensor : tensors) {
    const at::ScalarType dtype = tensor.scalar_type();
    TORCH_CHECK(!at::isComplexType(dtype), "pccl ", collective, ": complex tensors are not supported (",
                dtype, "); reduce torch.view_as_real(tensor) instead");
    TORCH_CHECK(op.op_ != c10d::ReduceOp::UNUSED, "pccl ", collective, ": no reduce op given");
    TORCH_CHECK(!isBitwise(op.op_) || at::isIntegralType(dtype, /*includeBool=*/true), "pccl ", collective, ": ",
                reduceOpName(op), " is defined on integer and bool tensors, got ", dtype);
    TORCH_CHECK(dtype != at::kBool || (op.op_ != c10d::ReduceOp::AVG && op.op_ != c10d::ReduceOp::PREMUL_SUM),
                "pccl ", collective, ": ", reduceOpName(op), " is not defined on bool tensors");
    TORCH_CHECK(op.op_ != c10d::ReduceOp::PREMUL_SUM || at::isFloatingType(dtype), "pccl ", collective,
                ": premul_sum is defined on floating-point tensors, got ", dtype);
  }
}

namespace {

// acc <- acc (op) row, in place (or from `first` into acc when given).
void combine(at::Tensor acc, const at::Tensor& first, const at::Tensor& row, c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM: at::add_out(acc, first, row); break;
    case c10d::ReduceOp::PRODUCT: at::mul_out(acc, first, row); break;
    case c10d::ReduceOp::MIN: at::minimum_out(acc, first, row); break;
    case c10d::ReduceOp::MAX: at::maximum_out(acc, first, row); break;
    case c10d::ReduceOp::BAND: at::bitwise_and_out(acc, first, row); break;
    case c10d::ReduceOp::BOR: at::bitwise_or_out(acc, first, row); break;
    case c10d::ReduceOp::BXOR: at::bitwise_xor_out(acc, first, row); break;
    default: TORCH_CHECK(false, "pccl: unsupported reduce op");
  }
}

// On bool, as the CPU's bool arithmetic: a sum or a maximum is an or, a product or a minimum an and.
c10d::ReduceOp::RedOpType boolOp(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::MAX: return c10d::ReduceOp::BOR;
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN: return c10d::ReduceOp::BAND;
    default: return op;
  }
}

}  // namespace

void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& rows, const c10d::ReduceOp& op) {
  const int ranks = static_cast<int>(rows.size());
  const at::ScalarType dtype = out.scalar_type();
  const c10d::ReduceOp::RedOpType kind = dtype == at::kBool ? boolOp(op.op_) : op.op_;
  // bfloat16 and float16 accumulate in float32, then round once.
  const bool widen = at::isReducedFloatingType(dtype);
  std::vector<at::Tensor> terms = rows;
  if (kind == c10d::ReduceOp::PREMUL_SUM) {
    for (at::Tensor& term : terms) term = scaled(widen ? term.to(at::kFloat) : term, op);
  }
  at::Tensor acc = widen ? at::empty(out.sizes(), out.options().dtype(at::kFloat)) : out;
  if (widen) {
    // Widened first (a converting copy is a device op), so that no combine rounds
    // in the narrow dtype.
    acc.copy_(terms[0]);
    for (int r = 1; r < ranks; ++r) combine(acc, acc, terms[r], kind);
  } else if (ranks == 1) {
    // A copy as an elementwise op: a program may read host memory in place, a
    // device-to-device memcpy may not.
    at::mul_out(acc, terms[0], acc.scalar_type() == at::kBool ? at::Scalar(true) : at::Scalar(1));
  } else {
    combine(acc, terms[0], terms[1], kind);
    for (int r = 2; r < ranks; ++r) combine(acc, acc, terms[r], kind);
  }
  if (kind == c10d::ReduceOp::AVG) {
    if (at::isFloatingType(acc.scalar_type())) {
      acc.div_(ranks);
    } else {
      acc.div_(ranks, "trunc");
    }
  }
  if (widen) out.copy_(acc);
}

}  // namespace pto::distributed
