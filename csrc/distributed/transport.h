// How the bytes of a collective move between the ranks of a group: host memory
// to host memory. The pccl backend (process_group_pccl.h) stages pto tensors
// through a transport's buffers and does the reductions on the device, so a
// transport only moves bytes: it never interprets them.
//
// Two transports: messages of a Gloo backend from the installed torch (TCP, any
// hosts; gloo_transport.h, which also carries a large allreduce's messages:
// allreduce_by_messages.h) and POSIX shared memory for ranks on one host
// (shm_transport.h).
//
// Every rank of the group calls the same exchanges in the same order. A call
// that cannot complete (a rank died, never arrived, or the group was aborted)
// throws TransportError within the transport's timeout, naming what was waited
// for and, where the transport can tell, the ranks that did not arrive.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace pto::distributed {

class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A key-value store every rank of the group reaches (the c10d Store in the backend).
struct Rendezvous {
  std::function<void(const std::string& key, const std::string& value)> set;
  // Blocks until `key` is set; throws TransportError when the timeout passes.
  std::function<std::string(const std::string& key)> get;
  // Whether `key` is set, without waiting.
  std::function<bool(const std::string& key)> check;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;  // "shm", "gloo": for people to read
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The most bytes one rank contributes to one exchange; the backend splits larger
  // collectives into rounds of at most this.
  virtual size_t capacity() const = 0;

  // Exchange k (every call below counts, from 0) sends from sendBuffer(k) and an
  // allgather or a broadcast delivers into received(k, r). The buffers rotate between two sets by the
  // parity of k, so the pointers of an exchange are known before it runs: the
  // backend queues device copies into and out of them ahead of time, and the
  // shared-memory transport moves nothing itself (zero copy). Writing
  // sendBuffer(k) is safe once this rank has returned from exchange k-1;
  // received(k, r) stays valid until this rank starts exchange k+1.
  virtual void* sendBuffer(uint64_t exchange) = 0;
  virtual const void* received(uint64_t exchange, int rank) const = 0;
  virtual uint64_t exchanges() const = 0;  // how many exchanges this rank has started

  // Each rank contributes the first `bytes` of its send buffer (the same `bytes`
  // on every rank); afterwards received(k, r) holds rank r's contribution.
  virtual void allgather(size_t bytes) = 0;
  // Only `root` contributes; afterwards received(k, root) holds its `bytes`.
  virtual void broadcast(size_t bytes, int root) = 0;
  // Moves whole blocks, outside the send and receive buffers: `input` holds one
  // block per destination rank q, packed in rank order, send_counts[q] bytes each
  // (counts may be zero and differ between ranks); afterwards `output` holds the
  // block each rank q sent to this one, packed in rank order, recv_counts[q]
  // bytes each. Each array has size() entries. `largest`, the most bytes any rank
  // sends to any rank, is the same on every rank (the caller exchanged the counts
  // first): a transport that carries the blocks through its buffers takes that
  // many bytes per block in rounds of exchanges, each counted by exchanges().
  virtual void alltoall(const size_t* send_counts, const size_t* recv_counts, size_t largest, const void* input,
                        void* output) = 0;

  virtual void barrier() = 0;
};

}  // namespace pto::distributed
