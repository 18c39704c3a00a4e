#include "distributed/gloo_transport.h"

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace pto::distributed {
namespace {

// A CPU byte tensor over host memory the transport owns.
at::Tensor bytesAt(const void* data, size_t bytes) {
  return at::from_blob(const_cast<void*>(data), {static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
}

class GlooTransport final : public Transport {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, Rendezvous rendezvous, size_t capacity)
      : gloo_(std::move(gloo)), rendezvous_(std::move(rendezvous)), capacity_(capacity) {
    // Left uninitialised: pages are only touched by the exchanges that use them.
    for (int set = 0; set < 2; ++set) {
      send_[set].reset(new uint8_t[capacity_]);
      receive_[set].reset(new uint8_t[capacity_ * static_cast<size_t>(size())]);
    }
    alltoall_offsets_.assign(static_cast<size_t>(size()), 0);
  }

  const char* name() const override { return "gloo"; }
  int rank() const override { return gloo_->getRank(); }
  int size() const override { return gloo_->getSize(); }
  size_t capacity() const override { return capacity_; }
  uint64_t exchanges() const override { return exchanges_; }

  void* sendBuffer(uint64_t exchange) override { return send_[exchange % 2].get(); }

  const void* received(uint64_t exchange, int rank) const override {
    return receive_[exchange % 2].get() + static_cast<size_t>(rank) * capacity_;
  }

  const void* alltoallReceived(int rank) const override {
    return receive_[(exchanges_ - 1) % 2].get() + alltoall_offsets_[static_cast<size_t>(rank)];
  }

  void allgather(size_t bytes) override {
    const uint64_t k = exchanges_++;
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size(); ++r) outputs[0].push_back(bytesAt(received(k, r), bytes));
    std::vector<at::Tensor> inputs{bytesAt(send_[k % 2].get(), bytes)};
    run("allgather", [&] { return gloo_->allgather(outputs, inputs); });
  }

  void broadcast(size_t bytes, int root) override {
    const uint64_t k = exchanges_++;
    void* delivered = const_cast<void*>(received(k, root));
    if (rank() == root) std::memcpy(delivered, send_[k % 2].get(), bytes);
    std::vector<at::Tensor> tensors{bytesAt(delivered, bytes)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    run("broadcast", [&] { return gloo_->broadcast(tensors, options); });
  }

  void alltoall(const size_t* send_counts, const size_t* recv_counts) override {
    const uint64_t k = exchanges_++;
    const auto n = static_cast<size_t>(size());
    std::vector<int64_t> send_splits(send_counts, send_counts + n);
    std::vector<int64_t> recv_splits(recv_counts, recv_counts + n);
    std::exclusive_scan(recv_counts, recv_counts + n, alltoall_offsets_.begin(), size_t{0});
    const size_t send_total = std::accumulate(send_counts, send_counts + n, size_t{0});
    const size_t recv_total = std::accumulate(recv_counts, recv_counts + n, size_t{0});
    at::Tensor input = bytesAt(send_[k % 2].get(), send_total);
    at::Tensor output = bytesAt(receive_[k % 2].get(), recv_total);
    run("alltoall", [&] { return gloo_->alltoall_base(output, input, recv_splits, send_splits); });
  }

  void barrier() override {
    ++exchanges_;
    run("barrier", [&] { return gloo_->barrier(); });
  }

 private:
  template <typename Start>
  void run(const char* exchange, Start start) {
    try {
      start()->wait();
    } catch (const std::exception& error) {
      throw TransportError("gloo transport: exchange " + std::to_string(exchanges_ - 1) + " (" + exchange +
                           ") failed: " + error.what() + missingRanks());
    }
  }

  // "; ranks [..] did not reach exchange k", from the store: every rank whose
  // exchange k failed says so there; a rank that stays silent for a grace period
  // never got there (or died).
  std::string missingRanks() {
    const uint64_t k = exchanges_ - 1;
    const std::string prefix = "pccl/failed-exchange/" + std::to_string(k) + "/";
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
    return "; ranks [" + names + "] did not reach exchange " + std::to_string(k);
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;
  Rendezvous rendezvous_;
  const size_t capacity_;
  std::unique_ptr<uint8_t[]> send_[2];
  std::unique_ptr<uint8_t[]> receive_[2];
  std::vector<size_t> alltoall_offsets_;  // where the last alltoall's blocks arrived
  uint64_t exchanges_ = 0;
};

}  // namespace

std::unique_ptr<Transport> makeGlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, Rendezvous rendezvous,
                                             size_t capacity) {
  return std::make_unique<GlooTransport>(std::move(gloo), std::move(rendezvous), capacity);
}

}  // namespace pto::distributed
