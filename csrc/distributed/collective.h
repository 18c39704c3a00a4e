// One pccl collective as it is queued on the communication stream: the event
// the caller's stream records and the communication stream waits for, the
// device<->host copies into and out of the transport's buffers, the transfers
// (host functions), and at the end the done event, the future and the Work.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/transport.h"
#include "distributed/work_pccl.h"
#include "runtime/pto_runtime.h"

namespace pto::distributed {

// The group's transport and its first failure. After a failed transfer the
// ranks no longer agree on where they are: every later collective of the group
// fails at once, naming that first failure (NCCL aborts the communicator).
class GroupChannel {
 public:
  GroupChannel(std::unique_ptr<Transport> transport, std::string group_name)
      : transport_(std::move(transport)), group_name_(std::move(group_name)) {}

  Transport& transport() { return *transport_; }
  const std::string& groupName() const { return group_name_; }
  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }

  // Runs one transfer on the communication stream's thread; returns why it failed, or "".
  std::string run(const std::string& collective, const std::function<void(Transport&)>& transfer);

 private:
  std::unique_ptr<Transport> transport_;
  const std::string group_name_;
  std::mutex mutex_;
  std::string failure_;
};

// Every contribution starts with this header: a rank that called a different
// collective, or the same one with other shapes or dtypes, is named in the
// error instead of exchanging garbage.
constexpr size_t kHeaderBytes = 64;
void writeHeader(void* at, uint64_t sequence, const std::string& signature);
// Throws TransportError naming `rank` when the header it sent (at `header`)
// differs from this rank's.
void checkHeader(const void* header, int rank, uint64_t sequence, const std::string& signature);
// Throws TransportError naming the first of `ranks` whose header (in exchange
// `exchange`) differs from this rank's.
void checkHeaders(Transport& transport, uint64_t exchange, const std::vector<int>& ranks, uint64_t sequence,
                  const std::string& signature);

class Collective {
 public:
  // Makes the communication stream wait for the caller's current stream and
  // makes it current for the reductions that follow.
  // `access`: what the device and the host reach of each other's memory.
  struct MemoryAccess {
    bool device_reads_host;  // PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS (see deviceReadsHost())
    bool host_reads_device;  // PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY (see hostReadsDevice())
  };
  Collective(std::shared_ptr<GroupChannel> channel, uint64_t* next_exchange, uint64_t sequence, const char* name,
             c10d::OpType type, c10::Stream comm_stream, MemoryAccess access, std::string signature);
  ~Collective();

  const char* name() const { return name_; }
  uint64_t sequence() const { return sequence_; }
  const std::string& signature() const { return signature_; }
  int rank() const { return channel_->rank(); }
  int size() const { return channel_->size(); }
  ptoStream stream() const { return stream_; }
  // Bytes of tensor data one exchange carries per rank (after the header).
  size_t payloadCapacity() const { return channel_->transport().capacity() - kHeaderBytes; }

  // The next exchange's send payload and a rank's received payload.
  uint8_t* sendPayload() const;
  const uint8_t* receivedPayload(int rank) const;

  // Whether device ops may read and write the transport's host buffers in place
  // (PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS): then reductions read the received
  // contributions where they arrived and write straight into the next send buffer.
  bool deviceReadsHost() const { return access_.device_reads_host; }
  // Whether host code (a transport's threads) may read and write device memory in
  // place (PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY): then messages leave from
  // and arrive in the tensors themselves, with no staging copy.
  bool hostReadsDevice() const { return access_.host_reads_device; }
  // A tensor of the collective's device over host memory (deviceReadsHost() only).
  at::Tensor hostTensor(const void* data, int64_t count, const at::TensorOptions& options) const;

  void toHost(void* dst, const at::Tensor& src, size_t src_byte_offset, size_t bytes);
  void toDevice(const at::Tensor& dst, size_t dst_byte_offset, const void* src, size_t bytes);

  // Queues an exchange of every rank's header + `payload_bytes` (the send payload
  // must be filled by queued copies first); afterwards receivedPayload(r) holds
  // what rank r sent (for a broadcast, only the root's).
  void allgather(size_t payload_bytes);
  void broadcast(size_t payload_bytes, int root);
  void barrier();
  // Queues host work that does its own exchanges (alltoall, point-to-point); it
  // must leave the transport at an even number of exchanges after it started.
  void hostTransfer(std::function<void(Transport&, TransferStatus&)> transfer);

  // Keeps host memory alive until everything queued so far has run.
  void keepAlive(std::shared_ptr<void> owner) { keep_alive_.push_back(std::move(owner)); }
  // Inputs and outputs the stream uses: the allocator must not reuse them before it ran.
  void uses(const at::Tensor& tensor);

  c10::intrusive_ptr<WorkPCCL> finish(std::vector<at::Tensor> outputs, bool blocks_host = false);

 private:
  void queueExchange(std::function<void(Transport&)> exchange);

  std::shared_ptr<GroupChannel> channel_;
  uint64_t* next_exchange_;
  uint64_t sequence_;
  const char* name_;
  c10d::OpType type_;
  c10::Stream comm_stream_;
  ptoStream stream_;
  std::string signature_;
  MemoryAccess access_;
  std::shared_ptr<TransferStatus> status_;
  std::vector<std::shared_ptr<void>> keep_alive_;
  std::unique_ptr<c10::StreamGuard> guard_;
  bool finished_ = false;
};

}  // namespace pto::distributed
