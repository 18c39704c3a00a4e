#include "distributed/reductions.h"

namespace pto::distributed {
namespace {

bool isLowPrecision(at::ScalarType dtype) { return dtype == at::kBFloat16 || dtype == at::kHalf; }

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

at::Tensor reduceRows(const at::Tensor& gathered, const c10d::ReduceOp& op, int ranks) {
  const at::ScalarType dtype = gathered.scalar_type();
  at::Tensor rows = isLowPrecision(dtype) ? gathered.to(at::kFloat) : gathered;
  if (dtype == at::kBool) {
    // As the CPU's bool arithmetic: a sum or a maximum is an or, a product or a minimum an and.
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
      case c10d::ReduceOp::BOR: return rows.any(0);
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN:
      case c10d::ReduceOp::BAND: return rows.all(0);
      default: break;
    }
  }
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) rows = scaled(rows, op);
  at::Tensor total = rows[0].clone();
  for (int r = 1; r < ranks; ++r) {
    const at::Tensor row = rows[r];
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::AVG:
      case c10d::ReduceOp::PREMUL_SUM: total.add_(row); break;
      case c10d::ReduceOp::PRODUCT: total.mul_(row); break;
      case c10d::ReduceOp::MIN: total = at::minimum(total, row); break;
      case c10d::ReduceOp::MAX: total = at::maximum(total, row); break;
      case c10d::ReduceOp::BAND: total.bitwise_and_(row); break;
      case c10d::ReduceOp::BOR: total.bitwise_or_(row); break;
      case c10d::ReduceOp::BXOR: total.bitwise_xor_(row); break;
      default: TORCH_CHECK(false, "pccl: unsupported reduce op ", reduceOpName(op));
    }
  }
  if (op.op_ == c10d::ReduceOp::AVG) {
    total = at::isFloatingType(total.scalar_type()) ? total.div_(ranks) : total.div(ranks, "trunc");
  }
  return total.to(dtype);
}

}  // namespace pto::distributed
