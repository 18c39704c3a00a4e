#include "distributed/gloo_transport.h"

#include <cstring>
#include <numeric>
#include <thread>

namespace pto::distributed {
namespace {

// A CPU byte tensor over host memory the transport owns.
at::Tensor bytesAt(const void* data, size_t bytes) {
  return at::from_blob(const_cast<void*>(data), {static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
}

// Gloo's tags are non-negative ints.
constexpr uint32_t kTagMask = 0x7fffffff;

}  // namespace

GlooTransport::GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, Rendezvous rendezvous, size_t capacity)
    : gloo_(std::move(gloo)), rendezvous_(std::move(rendezvous)), capacity_(capacity) {
  // Left uninitialised: pages are only touched by the exchanges that use them.
  for (int set = 0; set < 2; ++set) {
    send_[set].reset(new uint8_t[capacity_]);
    receive_[set].reset(new uint8_t[capacity_ * static_cast<size_t>(size())]);
  }
  checkCapacity();
}

// Every receive makes room for `capacity_` bytes: a rank whose capacity were larger
// could send past it.
void GlooTransport::checkCapacity() {
  rendezvous_.set("pccl/gloo-capacity/" + std::to_string(rank()), std::to_string(capacity_));
  for (int r = 0; r < size(); ++r) {
    const std::string theirs = rendezvous_.get("pccl/gloo-capacity/" + std::to_string(r));
    if (theirs != std::to_string(capacity_)) {
      throw TransportError("rank " + std::to_string(r) + " carries " + theirs + " bytes per exchange, this rank " +
                           std::to_string(capacity_) + ": every rank must set the same PTO_PCCL_BUFFER_BYTES");
    }
  }
}

const void* GlooTransport::received(uint64_t exchange, int rank) const {
  if (rank == this->rank()) return send_[exchange % 2].get();
  return receive_[exchange % 2].get() + static_cast<size_t>(rank) * capacity_;
}

uint32_t GlooTransport::reserveTags(uint32_t count) {
  const uint32_t first = next_tag_;
  next_tag_ = (next_tag_ + count) & kTagMask;
  return first;
}

GlooTransport::Message GlooTransport::startSend(int peer, uint32_t tag, const void* data, size_t bytes) {
  std::vector<at::Tensor> wire{bytesAt(data, bytes)};
  return gloo_->send(wire, peer, static_cast<int>(tag & kTagMask));
}

GlooTransport::Message GlooTransport::startReceive(int peer, uint32_t tag, void* data, size_t room) {
  std::vector<at::Tensor> wire{bytesAt(data, room)};
  return gloo_->recv(wire, peer, static_cast<int>(tag & kTagMask));
}

void GlooTransport::abort(std::vector<Message>& messages) {
  for (Message& message : messages) message->abort();
}

void GlooTransport::finish(uint32_t tag, const std::string& what, std::vector<Message>& messages) {
  size_t waited = 0;
  try {
    for (; waited < messages.size(); ++waited) messages[waited]->wait();
  } catch (const std::exception& error) {
    for (size_t i = waited + 1; i < messages.size(); ++i) messages[i]->abort();
    throw TransportError("gloo transport: " + what + " failed: " + error.what() + missingRanks(tag, what));
  }
}

void GlooTransport::startWithEveryPeer(uint32_t tag, const std::function<void*(int peer)>& into, const void* data,
                                       size_t bytes, std::vector<Message>& messages) {
  const int n = size(), me = rank();
  for (int i = 1; i < n; ++i) messages.push_back(startReceive((me + i) % n, tag, into((me + i) % n), capacity_));
  for (int i = 1; i < n; ++i) messages.push_back(startSend((me + i) % n, tag, data, bytes));
}

void GlooTransport::allgather(size_t bytes) { exchangeWithEveryPeer(bytes, "allgather"); }

// An exchange of one byte (whatever the send buffer holds), ignored.
void GlooTransport::barrier() { exchangeWithEveryPeer(1, "barrier"); }

void GlooTransport::exchangeWithEveryPeer(size_t bytes, const char* what) {
  const uint64_t k = exchanges_++;
  const uint32_t tag = reserveTags(1);
  std::vector<Message> messages;
  startWithEveryPeer(
      tag, [&](int peer) { return const_cast<void*>(received(k, peer)); }, send_[k % 2].get(), bytes, messages);
  finish(tag, "exchange " + std::to_string(k) + " (" + what + ")", messages);
}

void GlooTransport::broadcast(size_t bytes, int root) {
  const uint64_t k = exchanges_++;
  const uint32_t tag = reserveTags(1);
  const int n = size(), me = rank();
  std::vector<Message> messages;
  if (me == root) {
    for (int i = 1; i < n; ++i) messages.push_back(startSend((me + i) % n, tag, send_[k % 2].get(), bytes));
  } else {
    messages.push_back(startReceive(root, tag, const_cast<void*>(received(k, root)), capacity_));
  }
  finish(tag, "exchange " + std::to_string(k) + " (broadcast)", messages);
}

// The receives are sized to the counts: the caller checked them against the
// senders' before (process_group_pccl_staged.cpp).
void GlooTransport::alltoall(const size_t* send_counts, const size_t* recv_counts, size_t, const void* input,
                             void* output) {
  const uint64_t k = exchanges_++;
  const uint32_t tag = reserveTags(1);
  const int n = size(), me = rank();
  std::vector<size_t> send_offsets(n), recv_offsets(n);
  std::exclusive_scan(send_counts, send_counts + n, send_offsets.begin(), size_t{0});
  std::exclusive_scan(recv_counts, recv_counts + n, recv_offsets.begin(), size_t{0});
  const auto* sending = static_cast<const uint8_t*>(input);
  auto* arriving = static_cast<uint8_t*>(output);
  std::vector<Message> messages;
  for (int i = 1; i < n; ++i) {
    const int q = (me + i) % n;
    if (recv_counts[q] > 0) messages.push_back(startReceive(q, tag, arriving + recv_offsets[q], recv_counts[q]));
  }
  for (int i = 1; i < n; ++i) {
    const int q = (me + i) % n;
    if (send_counts[q] > 0) messages.push_back(startSend(q, tag, sending + send_offsets[q], send_counts[q]));
  }
  std::memcpy(arriving + recv_offsets[me], sending + send_offsets[me], send_counts[me]);
  finish(tag, "exchange " + std::to_string(k) + " (alltoall)", messages);
}

// "; ranks [..] did not reach <what>", from the store: every rank whose messages
// of `tag` failed says so there; a rank that stays silent for a grace period never got
// there (or died).
std::string GlooTransport::missingRanks(uint32_t tag, const std::string& what) {
  const std::string prefix = "pccl/failed/" + std::to_string(tag) + "/";
  std::vector<int> missing;
  try {
    rendezvous_.set(prefix + std::to_string(rank()), "1");
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) missing.push_back(r);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!missing.empty() && std::chrono::steady_clock::now() < deadline) {
      std::erase_if(missing, [&](int r) { return rendezvous_.check(prefix + std::to_string(r)); });
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception&) {
    return "";  // the store is gone too: nothing more to say
  }
  if (missing.empty()) return "";
  std::string names;
  for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
  return "; ranks [" + names + "] did not reach " + what;
}

}  // namespace pto::distributed
