// The allreduce between hosts (the Gloo transport), past what one exchange of
// everything carries quickly: a reduce-scatter then an allgather, each one
// round of messages straight between every pair of ranks (two network hops in
// all, where a ring takes 2(n - 1)), every rank sending and receiving
// 2(n - 1)/n of the tensor, as a ring does.
//
// The tensor is cut into chunks that pipeline: while one chunk's messages are on
// the wire the communication stream copies the next one to host memory, reduces
// the one before (a pto op reading the received parts in place where the device
// reads host memory) and copies results back. Each rank reduces one part of each
// chunk, in rank order, and sends that part to the others: every rank ends with
// the same bits, the ones the one-shot allreduce gives.
//
// Every message starts with the collective's header, checked before its data is
// used: ranks that called different collectives are named in the error, and
// every message of the collective still in flight is aborted.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <memory>

#include "distributed/collective.h"

namespace pto::distributed {

// Host memory an allreduce stages through, kept from call to call (its pages
// are touched once); a collective still queued keeps the block it uses alive.
class HostStaging {
 public:
  std::shared_ptr<uint8_t[]> atLeast(size_t bytes);

 private:
  std::shared_ptr<uint8_t[]> memory_;
  size_t bytes_ = 0;
};

// Queues the allreduce of `flat` (dense, on the collective's device) on `c`,
// whose transport is a GlooTransport.
void allreduceByMessages(Collective& c, const at::Tensor& flat, const c10d::ReduceOp& op, HostStaging& staging);

}  // namespace pto::distributed
