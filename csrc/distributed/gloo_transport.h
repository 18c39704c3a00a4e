// The Transport over Gloo as the installed torch ships it: a c10d Gloo backend
// (TCP, rendezvous through the c10d Store) moving CPU byte tensors. It works
// between any hosts; ranks on one host take the shared-memory transport unless
// told otherwise (PTO_PCCL_TRANSPORT).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>

#include "distributed/transport.h"

namespace pto::distributed {

std::unique_ptr<Transport> makeGlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, size_t capacity);

}  // namespace pto::distributed
