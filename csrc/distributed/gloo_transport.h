// The Transport over Gloo as the installed torch ships it: a c10d Gloo backend
// (TCP, rendezvous through the c10d Store) moving CPU byte tensors. It works
// between any hosts; ranks on one host take the shared-memory transport unless
// told otherwise (PTO_PCCL_TRANSPORT).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>

#include "distributed/transport.h"

namespace pto::distributed {

// `rendezvous` names the missing ranks when an exchange fails: each rank that
// failed at exchange k says so in the store, and the ranks that did not within a
// grace period are the ones that never reached it.
std::unique_ptr<Transport> makeGlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, Rendezvous rendezvous,
                                             size_t capacity);

}  // namespace pto::distributed
