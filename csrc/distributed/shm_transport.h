// The shared-memory transport: the ranks of one host exchange bytes through one
// POSIX shared-memory segment, each exchange costing one barrier and no copy on
// the receiving side (received() points into the sender's slot). Plain C++ and
// POSIX, no torch, so GoogleTest covers it alone (tests/cpp/distributed_shm_tests.cpp).
// The protocol that makes one barrier enough is described in shm_transport.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "distributed/transport.h"

namespace pto::distributed {

// Ranks of one host exchanging through one POSIX shared-memory segment. Rank 0 creates it
// and publishes its name through `rendezvous`; the segment is unlinked once every rank has
// mapped it, so nothing outlives the group even if a process is killed.
//
// The segment holds capacity × size × 2 bytes of slots plus a small control block; the
// memory is reserved up front, so a /dev/shm too small for it fails here with a
// TransportError rather than with a SIGBUS later. Every exchange (and the setup) waits
// at most `timeout` for the other ranks and fails fast when one of them has exited.
std::unique_ptr<Transport> makeShmTransport(int rank, int size, const Rendezvous& rendezvous,
                                            const std::string& group_key,  // unique per group: prefixes the rendezvous keys
                                            std::chrono::milliseconds timeout, size_t capacity);

}  // namespace pto::distributed
