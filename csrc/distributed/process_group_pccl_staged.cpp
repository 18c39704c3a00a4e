// The pccl operations whose transfers are decided on the host as they run:
// alltoall with uneven splits (how many rounds depends on every rank's splits)
// and point-to-point messages (Gloo's send and receive). The transport moves
// their data whole, from and into the tensors themselves where host code reaches
// device memory, else through a staging copy in host memory.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "distributed/collective.h"
#include "distributed/process_group_pccl.h"
#include "torch/device.h"

namespace pto::distributed {
namespace {

using HostBuffer = std::shared_ptr<uint8_t[]>;

HostBuffer hostBuffer(size_t bytes) { return HostBuffer(new uint8_t[std::max<size_t>(bytes, 1)]); }

at::Tensor hostBytes(const HostBuffer& buffer, size_t bytes) {
  return at::from_blob(buffer.get(), {static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
}

// Rank q's counts (after its header, at `at`), checked against this rank's: what q
// sends here must be what this rank expects from q.
std::vector<size_t> checkedCounts(const uint8_t* at, int q, int me, const std::vector<size_t>& recv_counts) {
  std::vector<size_t> theirs(recv_counts.size());
  std::memcpy(theirs.data(), at, theirs.size() * sizeof(size_t));
  if (theirs[me] != recv_counts[q]) {
    throw TransportError("rank " + std::to_string(q) + " sends " + std::to_string(theirs[me]) +
                         " bytes to this rank, which expects " + std::to_string(recv_counts[q]) +
                         " from it (output_split_sizes must match the senders' input_split_sizes)");
  }
  return theirs;
}

// Every rank's header and counts first, checked, then the blocks (in rounds
// through the transport's buffers, or one message per peer between hosts), then
// a barrier if needed to keep the exchange count even.
void alltoallTransfer(Transport& transport, uint64_t sequence, const std::string& signature,
                      const std::vector<size_t>& send_counts, const std::vector<size_t>& recv_counts,
                      const uint8_t* input, uint8_t* output) {
  const int n = transport.size();
  const int me = transport.rank();
  const uint64_t first = transport.exchanges();
  uint8_t* buffer = static_cast<uint8_t*>(transport.sendBuffer(first));
  writeHeader(buffer, sequence, signature);
  std::memcpy(buffer + kHeaderBytes, send_counts.data(), n * sizeof(size_t));
  transport.allgather(kHeaderBytes + n * sizeof(size_t));
  std::vector<int> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  checkHeaders(transport, first, ranks, sequence, signature);
  size_t largest = 0;
  for (int q = 0; q < n; ++q) {
    const std::vector<size_t> theirs =
        checkedCounts(static_cast<const uint8_t*>(transport.received(first, q)) + kHeaderBytes, q, me, recv_counts);
    largest = std::max(largest, *std::max_element(theirs.begin(), theirs.end()));
  }
  transport.alltoall(send_counts.data(), recv_counts.data(), largest, input, output);
  if ((transport.exchanges() - first) % 2 != 0) transport.barrier();
}

}  // namespace

// Bytes per rank of an all_to_all_single's input or output: its dim-0 split sizes
// (equal splits when none are given) times the bytes of a row.
std::vector<size_t> ProcessGroupPCCL::alltoallCounts(const at::Tensor& t, const std::vector<int64_t>& splits,
                                                     const char* which) const {
  const size_t row_bytes =
      t.dim() == 0 || t.size(0) == 0 ? 0 : static_cast<size_t>(t.numel() / t.size(0)) * t.element_size();
  std::vector<size_t> counts(size_);
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    TORCH_CHECK(rows % size_ == 0, "pccl all_to_all_single: the ", which, " has ", rows,
                " rows, not divisible by the group size ", size_, "; pass split sizes");
    std::fill(counts.begin(), counts.end(), static_cast<size_t>(rows / size_) * row_bytes);
    return counts;
  }
  const int64_t total = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  TORCH_CHECK(static_cast<int>(splits.size()) == size_, "pccl all_to_all_single: ", splits.size(), " ", which,
              " split sizes for a group of ", size_);
  TORCH_CHECK(total == rows, "pccl all_to_all_single: the ", which, " split sizes add up to ", total, ", the ", which,
              " has ", rows, " rows");
  for (int q = 0; q < size_; ++q) {
    TORCH_CHECK(splits[q] >= 0, "pccl all_to_all_single: negative split size ", splits[q]);
    counts[q] = static_cast<size_t>(splits[q]) * row_bytes;
  }
  return counts;
}

void ProcessGroupPCCL::queueAlltoall(Collective& c, const at::Tensor& output, const at::Tensor& input,
                                     std::vector<size_t> send_counts, std::vector<size_t> recv_counts) {
  const size_t send_total = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
  const size_t recv_total = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
  const at::Tensor dense = input.contiguous();
  const at::Tensor flat = output.is_contiguous() ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
  // Where host code reaches device memory, the transport reads the blocks from
  // and writes them into the tensors themselves. Like every device operand of a
  // collective they need no keeping: the caller's are recorded on the stream
  // (Collective::uses) and the temporaries here were allocated on it, so only work
  // queued after this transfer can reuse their memory.
  const bool in_place = c.hostReadsDevice();
  HostBuffer staged_in, staged_out;
  const uint8_t* sending = static_cast<const uint8_t*>(dense.const_data_ptr());
  uint8_t* arriving = static_cast<uint8_t*>(flat.data_ptr());
  if (!in_place) {
    staged_in = hostBuffer(send_total);
    staged_out = hostBuffer(recv_total);
    c.keepAlive(staged_in);
    c.keepAlive(staged_out);
    c.toHost(staged_in.get(), dense, 0, send_total);
    sending = staged_in.get();
    arriving = staged_out.get();
  }
  c.hostTransfer([=, sequence = c.sequence(), signature = c.signature()](Transport& transport, TransferStatus&) {
    alltoallTransfer(transport, sequence, signature, send_counts, recv_counts, sending, arriving);
  });
  if (!in_place) c.toDevice(flat, 0, staged_out.get(), recv_total);
  if (!output.is_contiguous()) output.copy_(flat);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  const c10::Device device = deviceOf({input, output}, "all_to_all_single");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "pccl all_to_all_single: input ",
              input.scalar_type(), " and output ", output.scalar_type(), " differ");
  std::vector<size_t> send_counts = alltoallCounts(input, input_split_sizes, "input");
  std::vector<size_t> recv_counts = alltoallCounts(output, output_split_sizes, "output");
  Collective c = begin("all_to_all_single", c10d::OpType::ALLTOALL_BASE, device,
                       "all_to_all_single " + std::string(c10::toString(input.scalar_type())));
  c.uses(input);
  c.uses(output);
  queueAlltoall(c, output, input, std::move(send_counts), std::move(recv_counts));
  return c.finish({output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "pccl all_to_all: one input and one output tensor per rank (", size_, "), got ", inputs.size(),
              " and ", outputs.size());
  const c10::Device device = deviceOf(inputs, "all_to_all");
  deviceOf(outputs, "all_to_all");
  std::vector<size_t> send_counts, recv_counts;
  for (int q = 0; q < size_; ++q) {
    TORCH_CHECK(inputs[q].scalar_type() == inputs[0].scalar_type() &&
                    outputs[q].scalar_type() == inputs[0].scalar_type(),
                "pccl all_to_all: every tensor must have one dtype, got ", inputs[q].scalar_type(), " and ",
                outputs[q].scalar_type());
    send_counts.push_back(static_cast<size_t>(inputs[q].numel()) * inputs[q].element_size());
    recv_counts.push_back(static_cast<size_t>(outputs[q].numel()) * outputs[q].element_size());
  }
  Collective c = begin("all_to_all", c10d::OpType::ALLTOALL, device,
                       "all_to_all_single " + std::string(c10::toString(inputs[0].scalar_type())));
  // One packed exchange; the packing and the split-out copies run on the
  // communication stream, inside the collective (its Work covers them).
  std::vector<at::Tensor> flat_inputs;
  int64_t output_numel = 0;
  for (int q = 0; q < size_; ++q) {
    c.uses(inputs[q]);
    c.uses(outputs[q]);
    flat_inputs.push_back(inputs[q].reshape(-1));
    output_numel += outputs[q].numel();
  }
  const at::Tensor packed_output = at::empty({output_numel}, inputs[0].options());
  queueAlltoall(c, packed_output, at::cat(flat_inputs), std::move(send_counts), std::move(recv_counts));
  int64_t offset = 0;
  for (int q = 0; q < size_; ++q) {
    outputs[q].copy_(packed_output.narrow(0, offset, outputs[q].numel()).view(outputs[q].sizes()));
    offset += outputs[q].numel();
  }
  return c.finish(outputs);
}

// ---------------------------------------------------------------------------
// Point to point, through the Gloo backend of the same ranks.

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::pointToPoint(const char* name, c10d::OpType type, at::Tensor tensor,
                                                              int peer, int tag) {
  const c10::Device device = deviceOf({tensor}, name);
  TORCH_CHECK(peer == -1 || (peer >= 0 && peer < size_ && peer != rank_), "pccl ", name, ": peer rank ", peer,
              " is not another rank of a group of ", size_);
  PendingMessage message{type == c10d::OpType::SEND, tensor, at::Tensor(), peer, tag, nullptr};
  if (coalescing_) {
    coalescing_->messages.push_back(std::move(message));
    return c10d::Work::create_from_future(coalescing_->done);
  }
  std::vector<PendingMessage> messages{std::move(message)};
  return queueMessages(name, type, device, std::move(messages));
}

c10::intrusive_ptr<WorkPCCL> ProcessGroupPCCL::queueMessages(const char* name, c10d::OpType type, c10::Device device,
                                                            std::vector<PendingMessage> messages) {
  Collective c = begin(name, type, device, name, /*group_wide=*/false);
  std::vector<at::Tensor> outputs;
  for (PendingMessage& message : messages) {
    c.uses(message.tensor);
    message.dense = message.send ? message.tensor.contiguous()
                                 : (message.tensor.is_contiguous() ? message.tensor : at::empty_like(message.tensor, at::MemoryFormat::Contiguous));
    const size_t bytes = static_cast<size_t>(message.tensor.numel()) * message.tensor.element_size();
    message.staged = hostBuffer(bytes);
    c.keepAlive(message.staged);
    if (message.send) c.toHost(message.staged.get(), message.dense, 0, bytes);
    else outputs.push_back(message.tensor);
  }
  auto transfers = std::make_shared<std::vector<PendingMessage>>(messages);
  c.hostTransfer([gloo = gloo_, transfers](Transport&, TransferStatus& status) {
    // Every send and receive starts before any is waited for: a batch never
    // deadlocks on its own order.
    std::vector<c10::intrusive_ptr<c10d::Work>> started;
    for (PendingMessage& message : *transfers) {
      const size_t bytes = static_cast<size_t>(message.tensor.numel()) * message.tensor.element_size();
      std::vector<at::Tensor> wire{hostBytes(message.staged, bytes)};
      if (message.send) started.push_back(gloo->send(wire, message.peer, message.tag));
      else if (message.peer >= 0) started.push_back(gloo->recv(wire, message.peer, message.tag));
      else started.push_back(gloo->recvAnysource(wire, message.tag));
    }
    for (size_t i = 0; i < started.size(); ++i) {
      started[i]->wait();
      if ((*transfers)[i].peer < 0) {
        std::lock_guard<std::mutex> lock(status.mutex);
        status.source_rank = started[i]->sourceRank();
      }
    }
  });
  for (PendingMessage& message : messages) {
    if (message.send) continue;
    c.toDevice(message.dense, 0, message.staged.get(),
               static_cast<size_t>(message.tensor.numel()) * message.tensor.element_size());
    if (!message.tensor.is_contiguous()) message.tensor.copy_(message.dense);
  }
  return c.finish(outputs);
}

c10::intrusive_ptr<WorkPCCL> ProcessGroupPCCL::markerWork() {
  Collective c = begin("coalesced", c10d::OpType::COALESCED, defaultDevice(), "", /*group_wide=*/false);
  return c.finish({});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  TORCH_CHECK(tensors.size() == 1, "pccl send: one tensor per call, got ", tensors.size());
  return pointToPoint("send", c10d::OpType::SEND, tensors[0], dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  TORCH_CHECK(tensors.size() == 1, "pccl recv: one tensor per call, got ", tensors.size());
  return pointToPoint("recv", c10d::OpType::RECV, tensors[0], src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  TORCH_CHECK(tensors.size() == 1, "pccl recv: one tensor per call, got ", tensors.size());
  return pointToPoint("recv", c10d::OpType::RECVANYSOURCE, tensors[0], -1, tag);
}

void ProcessGroupPCCL::startCoalescing() {
  TORCH_CHECK(!coalescing_, "pccl: startCoalescing called twice without endCoalescing");
  coalescing_ = std::make_unique<PointToPointBatch>();
  coalescing_->done = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::endCoalescing() {
  TORCH_CHECK(coalescing_, "pccl: endCoalescing without startCoalescing");
  std::unique_ptr<PointToPointBatch> batch = std::move(coalescing_);
  c10::intrusive_ptr<c10d::Work> work;
  if (batch->messages.empty()) {
    // Collectives queued meanwhile ran as they came: wait for them all.
    work = markerWork();
  } else {
    const c10::Device device = batch->messages.front().tensor.device();
    work = queueMessages("batch_isend_irecv", c10d::OpType::COALESCED, device, std::move(batch->messages));
  }
  batch->done->markCompleted(c10::IValue());
  return work;
}

}  // namespace pto::distributed
