// The Transport between hosts: point-to-point messages of a c10d Gloo backend of
// its own (TCP, rendezvous through the c10d Store), moving host bytes. Every
// exchange is one round of messages straight to the ranks concerned: an
// allgather is each rank's buffer sent to every other rank at once (one network
// hop, not Gloo's ring of n - 1), so a collective's header rides with its data.
// Ranks on one host take the shared-memory transport unless told otherwise
// (PTO_PCCL_TRANSPORT).
//
// The backend is the transport's alone: user send/recv on a pccl group go
// through another Gloo backend, whose tags could otherwise meet these.
//
// A receive is posted with room for the largest message any rank may send (the
// capacity, which every rank checks it shares at start): Gloo ends the process
// when a message outgrows its receive buffer, which ranks that disagree on a
// collective's shapes would otherwise provoke before the header says so.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/transport.h"

namespace pto::distributed {

class GlooTransport final : public Transport {
 public:
  // A started send or receive; finish() waits for it.
  using Message = c10::intrusive_ptr<c10d::Work>;

  // `rendezvous` checks the capacity and names the missing ranks when an exchange
  // fails: each rank that failed says so in the store, and the ranks that did not
  // within a grace period are the ones that never got there.
  GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, Rendezvous rendezvous, size_t capacity);

  const char* name() const override { return "gloo"; }
  int rank() const override { return gloo_->getRank(); }
  int size() const override { return gloo_->getSize(); }
  size_t capacity() const override { return capacity_; }
  uint64_t exchanges() const override { return exchanges_; }
  void* sendBuffer(uint64_t exchange) override { return send_[exchange % 2].get(); }
  // This rank's own contribution is read where it was written: its send buffer.
  const void* received(uint64_t exchange, int rank) const override;

  void allgather(size_t bytes) override;
  void broadcast(size_t bytes, int root) override;
  // One message per peer, straight from `input` into `output`.
  void alltoall(const size_t* send_counts, const size_t* recv_counts, size_t largest, const void* input,
                void* output) override;
  void barrier() override;

  // Messages outside the exchanges (the pipelined allreduce of
  // allreduce_by_messages.cpp), on the communication stream's thread. Every rank
  // reserves the same tags in the same order; a message from rank a to rank b
  // carries a tag no other message between them in flight has.
  uint32_t reserveTags(uint32_t count);
  Message startSend(int peer, uint32_t tag, const void* data, size_t bytes);
  // `room`: at least the capacity (see above), the buffer's bytes past what the
  // message fills included.
  Message startReceive(int peer, uint32_t tag, void* data, size_t room);
  // Waits for every message (of the tags reserved from `tag` on); the first failure
  // aborts the rest and throws TransportError naming `what` and the ranks that did
  // not get there.
  void finish(uint32_t tag, const std::string& what, std::vector<Message>& messages);
  // Aborts messages that will never be waited for (a check failed meanwhile).
  static void abort(std::vector<Message>& messages);
  // Starts, for every other rank, a receive into `into(peer)` with room for the
  // capacity and a send of the `bytes` at `data`, the ranks after this one first
  // (so that not every rank sends to rank 0 at once).
  void startWithEveryPeer(uint32_t tag, const std::function<void*(int peer)>& into, const void* data, size_t bytes,
                          std::vector<Message>& messages);

 private:
  void checkCapacity();
  // Sends the first `bytes` of the send buffer to every other rank; theirs arrive
  // in received().
  void exchangeWithEveryPeer(size_t bytes, const char* what);
  std::string missingRanks(uint32_t tag, const std::string& what);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  Rendezvous rendezvous_;
  const size_t capacity_;
  std::unique_ptr<uint8_t[]> send_[2];
  std::unique_ptr<uint8_t[]> receive_[2];
  uint64_t exchanges_ = 0;
  uint32_t next_tag_ = 0;
};

}  // namespace pto::distributed
