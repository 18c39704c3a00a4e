// pccl: the c10d backend of pto tensors (torch.distributed's "pccl", as NCCL is
// CUDA's and HCCL Ascend's).
//
// Each collective is queued on its device's communication stream, after an event
// of the caller's current stream: device-to-host copies into the transport's
// buffers, the transfer (a host function: transport.h), host-to-device copies
// out of them and the reductions, which are pto ops (PTO instructions) on that
// stream. The returned Work is WorkPCCL (work_pccl.h). The bytes move through
// shared memory when every rank is on this host (and network namespace), else
// as messages of a Gloo backend (gloo_transport.h).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/allreduce_by_messages.h"
#include "distributed/collective.h"
#include "distributed/transport.h"
#include "distributed/work_pccl.h"

namespace pto::distributed {

// A send or receive not queued yet (process_group_pccl_staged.cpp).
struct PendingMessage {
  bool send;
  at::Tensor tensor;               // the user's
  at::Tensor dense;                // what moves: the tensor, or a contiguous twin
  int peer;                        // -1: a receive from any source
  int tag;
  std::shared_ptr<uint8_t[]> staged;  // its bytes in host memory
};

// The messages issued between startCoalescing and endCoalescing.
struct PointToPointBatch {
  std::vector<PendingMessage> messages;
  c10::intrusive_ptr<c10::ivalue::Future> done;  // completes at endCoalescing
};

class ProcessGroupPCCL final : public c10d::Backend {
 public:
  struct Config {
    std::chrono::milliseconds timeout;
    std::string group_name;
    std::string transport = "auto";  // "auto" (shm on one host, else gloo), "shm" or "gloo"
    std::optional<c10::DeviceIndex> bound_device;
  };

  // `gloo` is a Gloo backend of the same ranks: it carries point-to-point
  // messages. `make_transport_gloo` makes another, the transport between hosts,
  // when the group needs one.
  using BackendFactory = std::function<c10::intrusive_ptr<c10d::Backend>()>;
  ProcessGroupPCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   c10::intrusive_ptr<c10d::Backend> gloo, const BackendFactory& make_transport_gloo, Config config);
  ~ProcessGroupPCCL() override;

  const std::string getBackendName() const override { return "pccl"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsCoalescing() const override { return true; }
  std::string transportName() const;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

 private:
  // Binds the group to `device` on first use and starts queueing a collective;
  // a group-wide one takes the next sequence number (every rank counts the same).
  Collective begin(const char* name, c10d::OpType type, c10::Device device, std::string signature,
                   bool group_wide = true);
  c10::Device deviceOf(const std::vector<at::Tensor>& tensors, const char* collective) const;
  std::vector<size_t> alltoallCounts(const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) const;
  // Stages `input` in host memory, exchanges its blocks (a host transfer: how many
  // rounds depends on every rank's counts) and copies what arrived into `output`.
  void queueAlltoall(Collective& c, const at::Tensor& output, const at::Tensor& input,
                     std::vector<size_t> send_counts, std::vector<size_t> recv_counts);
  c10::Device defaultDevice() const;
  c10::intrusive_ptr<c10d::Work> pointToPoint(const char* name, c10d::OpType type, at::Tensor tensor, int peer,
                                              int tag);
  // Queues the messages' transfers together: every send and receive starts before any is waited for.
  c10::intrusive_ptr<WorkPCCL> queueMessages(const char* name, c10d::OpType type, c10::Device device,
                                            std::vector<PendingMessage> messages);
  // A Work that completes once everything queued so far on the communication stream has run.
  c10::intrusive_ptr<WorkPCCL> markerWork();
  // Queues the allreduce of `flat` (dense): one exchange of everything, or a
  // reduce-scatter and an allgather (on shared memory, through the exchanges;
  // between hosts, by messages: allreduce_by_messages.h).
  void allreduceTensor(Collective& c, const at::Tensor& flat, const c10d::ReduceOp& op);

  Config config_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  std::shared_ptr<GroupChannel> channel_;
  uint64_t sequence_ = 0;       // collectives queued so far: every rank counts the same
  uint64_t next_exchange_ = 0;  // the transport exchange the next queued transfer will be
  std::optional<c10::Device> device_;  // the device this group's collectives run on, once used
  std::optional<c10::Stream> comm_stream_;
  Collective::MemoryAccess memory_access_{};  // the device's, once bound
  bool between_hosts_ = false;  // the transport is Gloo's (TCP)
  HostStaging staging_;         // allreduceByMessages' host memory
  // Point-to-point operations issued between startCoalescing and endCoalescing:
  // their transfers start together, so a batch of sends and receives never waits
  // on its own order (batch_isend_irecv).
  std::unique_ptr<PointToPointBatch> coalescing_;
};

}  // namespace pto::distributed
