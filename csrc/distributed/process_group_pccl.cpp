#include "distributed/process_group_pccl.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>

#include "distributed/allreduce_by_messages.h"
#include "distributed/collective.h"
#include "distributed/gloo_transport.h"
#include "distributed/reductions.h"
#include "distributed/shm_transport.h"
#include "torch/device.h"
#include "torch/pto_check.h"

namespace pto::distributed {
namespace {

constexpr size_t kDefaultBufferBytes = size_t{4} << 20;
// Below this many gathered bytes an allreduce exchanges once and every rank
// reduces everything (latency); above it, a reduce-scatter then an allgather.
constexpr size_t kOneShotBytes = size_t{512} << 10;

size_t bufferBytes() {
  const char* value = std::getenv("PTO_PCCL_BUFFER_BYTES");
  if (value == nullptr || *value == '\0') return kDefaultBufferBytes;
  const long long bytes = std::atoll(value);
  TORCH_CHECK(bytes >= 4096, "PTO_PCCL_BUFFER_BYTES must be at least 4096, got '", value, "'");
  return static_cast<size_t>(bytes);
}

// The host as the ranks see each other: its name and boot, and the network
// namespace. Ranks in two namespaces of one machine (containers, `ip netns`) may
// well share /dev/shm, but they meet over the network as separate hosts do, and
// are treated as such: their bytes move through Gloo.
std::string hostIdentity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  char network[64] = {};
  const ssize_t length = readlink("/proc/self/ns/net", network, sizeof(network) - 1);
  return std::string(name) + "/" + boot_id + "/" + (length > 0 ? std::string(network, length) : "");
}

std::vector<uint8_t> bytesOf(const std::string& text) { return {text.begin(), text.end()}; }

bool allOnThisHost(c10d::Store& store, int rank, int size) {
  const std::string mine = hostIdentity();
  store.set("pccl/host/" + std::to_string(rank), bytesOf(mine));
  for (int r = 0; r < size; ++r) {
    const std::vector<uint8_t> theirs = store.get("pccl/host/" + std::to_string(r));
    if (std::string(theirs.begin(), theirs.end()) != mine) return false;
  }
  return true;
}

Rendezvous storeRendezvous(c10::intrusive_ptr<c10d::Store> store) {
  return Rendezvous{
      [store](const std::string& key, const std::string& value) { store->set(key, bytesOf(value)); },
      [store](const std::string& key) {
        try {
          const std::vector<uint8_t> value = store->get(key);
          return std::string(value.begin(), value.end());
        } catch (const std::exception& error) {
          throw TransportError("waiting for '" + key + "' in the store: " + error.what());
        }
      },
      [store](const std::string& key) { return store->check({key}); }};
}

std::string shortType(const at::Tensor& tensor) {
  return std::string(c10::toString(tensor.scalar_type())) + "[" + std::to_string(tensor.numel()) + "]";
}

std::string signatureOf(const char* name, const std::vector<at::Tensor>& tensors, const std::string& extra = "") {
  std::string signature = std::string(name) + (extra.empty() ? "" : " " + extra);
  for (const at::Tensor& tensor : tensors) signature += " " + shortType(tensor);
  return signature;
}

// A dense tensor with `tensor`'s data, queued on the current (communication) stream.
at::Tensor denseFlat(const at::Tensor& tensor) { return tensor.contiguous().view(-1); }

// Output staging: `tensor` itself when it is contiguous, else a contiguous twin
// copied back by writeBack.
at::Tensor outputFlat(const at::Tensor& tensor) {
  return tensor.is_contiguous() ? tensor.view(-1) : at::empty({tensor.numel()}, tensor.options());
}

void writeBack(const at::Tensor& tensor, const at::Tensor& flat) {
  if (!tensor.is_contiguous()) tensor.copy_(flat.view(tensor.sizes()));
}

// Elements of each exchange round such that `per_rank_blocks` blocks of them fit the payload.
int64_t roundElements(const Collective& collective, const at::Tensor& tensor, int64_t per_rank_blocks) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(collective.payloadCapacity() / (tensor.element_size() * per_rank_blocks)));
}

}  // namespace

ProcessGroupPCCL::ProcessGroupPCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   c10::intrusive_ptr<c10d::Backend> gloo, const BackendFactory& make_transport_gloo,
                                   Config config)
    : c10d::Backend(rank, size), config_(std::move(config)), gloo_(std::move(gloo)) {
  std::string transport = config_.transport;
  TORCH_CHECK(transport == "auto" || transport == "shm" || transport == "gloo",
              "pccl: PTO_PCCL_TRANSPORT must be auto, shm or gloo, got '", transport, "'");
  const bool automatic = transport == "auto";
  if (automatic) transport = allOnThisHost(*store, rank, size) ? "shm" : "gloo";
  // Each exchange carries a header before the payload: size the buffers so that
  // PTO_PCCL_BUFFER_BYTES of tensor data fit (a 4 MiB tensor is one round).
  const size_t capacity = bufferBytes() + kHeaderBytes;
  std::unique_ptr<Transport> chosen;
  try {
    if (transport == "shm") {
      try {
        chosen = makeShmTransport(rank, size, storeRendezvous(store), "pccl/" + config_.group_name, config_.timeout,
                                  capacity);
      } catch (const TransportError& error) {
        // A small /dev/shm (a container's default 64 MiB) must not stop a job that
        // Gloo can carry; every rank learns of rank 0's failure, so all fall back.
        if (!automatic) throw;
        TORCH_WARN("pccl: group '", config_.group_name, "' uses the Gloo transport: ", error.what());
        transport = "gloo";
      }
    }
    if (!chosen) {
      chosen = std::make_unique<GlooTransport>(make_transport_gloo(), storeRendezvous(store), capacity);
      between_hosts_ = true;
    }
  } catch (const TransportError& error) {
    TORCH_CHECK_WITH(DistBackendError, false, "pccl: group '", config_.group_name, "' (rank ", rank, " of ", size,
                     ") could not start its ", transport, " transport: ", error.what());
  }
  channel_ = std::make_shared<GroupChannel>(std::move(chosen), config_.group_name);
}

ProcessGroupPCCL::~ProcessGroupPCCL() {
  // Queued copies point into the transport's buffers: let them run first.
  if (comm_stream_) ptoStreamSynchronize(torch_glue::nativeStream(*comm_stream_));
}

std::string ProcessGroupPCCL::transportName() const { return channel_->transport().name(); }

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupPCCL::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("pccl", config_.timeout);
  options->group_name = config_.group_name;
  return options;
}

c10::Device ProcessGroupPCCL::defaultDevice() const {
  if (device_) return *device_;
  if (config_.bound_device) return c10::Device(c10::DeviceType::PrivateUse1, *config_.bound_device);
  if (const char* local_rank = std::getenv("LOCAL_RANK"); local_rank != nullptr && *local_rank != '\0') {
    return c10::Device(c10::DeviceType::PrivateUse1,
                       static_cast<c10::DeviceIndex>(std::atoi(local_rank) % torch_glue::deviceCount()));
  }
  return c10::Device(c10::DeviceType::PrivateUse1, torch_glue::currentDevice());
}

c10::Device ProcessGroupPCCL::deviceOf(const std::vector<at::Tensor>& tensors, const char* collective) const {
  TORCH_CHECK(!tensors.empty(), "pccl ", collective, ": no tensors given");
  const c10::Device device = tensors.front().device();
  for (const at::Tensor& tensor : tensors) {
    TORCH_CHECK(tensor.defined(), "pccl ", collective, ": a tensor is undefined");
    TORCH_CHECK(tensor.device() == device, "pccl ", collective, ": every tensor must be on the same pto device, got ",
                device, " and ", tensor.device(), " (", shortType(tensor), ")");
    TORCH_CHECK(tensor.layout() == at::kStrided, "pccl ", collective, ": only strided (dense) tensors, got ",
                tensor.layout());
  }
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "pccl ", collective,
              ": pccl moves pto tensors; got a tensor on ", device,
              " (use a 'cpu:gloo,pto:pccl' process group for CPU tensors)");
  TORCH_CHECK(!device_ || *device_ == device, "pccl ", collective, ": group '", config_.group_name,
              "' runs on ", *device_, ", got a tensor on ", device,
              "; use one device per process and group, as with NCCL");
  return device;
}

// ---------------------------------------------------------------------------
// Every collective: validate first (a check failing after a transfer is queued
// would leave the ranks out of step), then queue.

Collective ProcessGroupPCCL::begin(const char* name, c10d::OpType type, c10::Device device, std::string signature,
                                   bool group_wide) {
  if (!device_) {
    device_ = device;
    comm_stream_ = torch_glue::streamFromPool(device.index());
    memory_access_ = {
        torch_glue::deviceAttribute(device.index(), PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS) != 0,
        torch_glue::deviceAttribute(device.index(), PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY) != 0};
  }
  // Point-to-point traffic involves only its peers: it takes no group sequence number.
  const uint64_t sequence = group_wide ? sequence_++ : sequence_;
  return Collective(channel_, &next_exchange_, sequence, name, type, *comm_stream_, memory_access_,
                    std::move(signature));
}

namespace {

// Every rank's `count` elements at byte `offset` of what the last exchange
// delivered, as device tensors: the transport's host buffers themselves where the
// device reads host memory (no copy), else copies of them.
std::vector<at::Tensor> receivedRows(Collective& c, size_t offset, int64_t count, const at::TensorOptions& options) {
  const size_t bytes = count * c10::elementSize(options.dtype().toScalarType());
  std::vector<at::Tensor> rows;
  if (c.deviceReadsHost()) {
    for (int q = 0; q < c.size(); ++q) rows.push_back(c.hostTensor(c.receivedPayload(q) + offset, count, options));
    return rows;
  }
  const at::Tensor staged = at::empty({c.size(), count}, options);
  for (int q = 0; q < c.size(); ++q) {
    c.toDevice(staged, q * bytes, c.receivedPayload(q) + offset, bytes);
    rows.push_back(staged[q]);
  }
  return rows;
}

void allreduceFlat(Collective& c, const at::Tensor& flat, const c10d::ReduceOp& op) {
  const int n = c.size();
  const size_t es = flat.element_size();
  const int64_t numel = flat.numel();
  const int64_t round = roundElements(c, flat, 1);
  for (int64_t start = 0; start < numel; start += round) {
    const int64_t count = std::min(round, numel - start);
    c.toHost(c.sendPayload(), flat, start * es, count * es);
    c.allgather(count * es);
    if (static_cast<size_t>(count) * es * n <= kOneShotBytes) {
      reduceInto(flat.narrow(0, start, count), receivedRows(c, 0, count, flat.options()), op);
      continue;
    }
    // Reduce-scatter: each rank reduces its chunk of every rank's segment ...
    const int64_t chunk = (count + n - 1) / n;
    auto chunkLength = [&](int q) { return std::clamp<int64_t>(count - q * chunk, 0, chunk); };
    const int64_t mine = chunkLength(c.rank());
    const std::vector<at::Tensor> rows = receivedRows(c, c.rank() * chunk * es, mine, flat.options());
    // ... into the next exchange's send buffer, then allgathers the reduced chunks.
    if (c.deviceReadsHost()) {
      reduceInto(c.hostTensor(c.sendPayload(), mine, flat.options()), rows, op);
    } else {
      const at::Tensor reduced = at::empty({mine}, flat.options());
      reduceInto(reduced, rows, op);
      c.toHost(c.sendPayload(), reduced, 0, mine * es);
    }
    c.allgather(chunk * es);
    for (int q = 0; q < n; ++q) c.toDevice(flat, (start + q * chunk) * es, c.receivedPayload(q), chunkLength(q) * es);
  }
}

void allgatherFlat(Collective& c, const at::Tensor& input, const std::vector<at::Tensor>& outputs) {
  const size_t es = input.element_size();
  const int64_t numel = input.numel();
  const int64_t round = roundElements(c, input, 1);
  for (int64_t start = 0; start < numel; start += round) {
    const int64_t count = std::min(round, numel - start);
    c.toHost(c.sendPayload(), input, start * es, count * es);
    c.allgather(count * es);
    for (int q = 0; q < c.size(); ++q) {
      if (outputs[q].defined()) c.toDevice(outputs[q], start * es, c.receivedPayload(q), count * es);
    }
  }
}

void reduceScatterFlat(Collective& c, const std::vector<at::Tensor>& inputs, const at::Tensor& output,
                       const c10d::ReduceOp& op) {
  const int n = c.size();
  const size_t es = output.element_size();
  const int64_t numel = output.numel();
  const int64_t round = roundElements(c, output, n);
  for (int64_t start = 0; start < numel; start += round) {
    const int64_t count = std::min(round, numel - start);
    for (int q = 0; q < n; ++q) c.toHost(c.sendPayload() + q * count * es, inputs[q], start * es, count * es);
    c.allgather(n * count * es);
    reduceInto(output.narrow(0, start, count), receivedRows(c, c.rank() * count * es, count, output.options()), op);
  }
}

}  // namespace

void ProcessGroupPCCL::allreduceTensor(Collective& c, const at::Tensor& flat, const c10d::ReduceOp& op) {
  // Between hosts, past one exchange of everything (kOneShotBytes gathered): each
  // rank's share of the bytes goes straight to the rank reducing it.
  const size_t bytes = static_cast<size_t>(flat.numel()) * flat.element_size();
  if (between_hosts_ && bytes * static_cast<size_t>(size_) > kOneShotBytes) {
    allreduceByMessages(c, flat, op, staging_);
  } else {
    allreduceFlat(c, flat, op);
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const c10::Device device = deviceOf(tensors, "allreduce");
  TORCH_CHECK(tensors.size() == 1, "pccl allreduce: one tensor per process, got ", tensors.size());
  checkReduceOp("allreduce", opts.reduceOp, tensors);
  Collective c = begin("allreduce", c10d::OpType::ALLREDUCE, device,
                  signatureOf("allreduce", tensors, reduceOpName(opts.reduceOp)));
  c.uses(tensors[0]);
  const at::Tensor flat = outputFlat(tensors[0]);
  if (!tensors[0].is_contiguous()) flat.copy_(tensors[0].reshape(-1));
  allreduceTensor(c, flat, opts.reduceOp);
  writeBack(tensors[0], flat);
  return c.finish(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  const c10::Device device = deviceOf(tensors, "allreduce_coalesced");
  checkReduceOp("allreduce_coalesced", opts.reduceOp, tensors);
  Collective c = begin("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, device,
                  signatureOf("allreduce_coalesced", tensors, reduceOpName(opts.reduceOp)));
  for (const at::Tensor& tensor : tensors) {
    c.uses(tensor);
    const at::Tensor flat = outputFlat(tensor);
    if (!tensor.is_contiguous()) flat.copy_(tensor.reshape(-1));
    allreduceTensor(c, flat, opts.reduceOp);
    writeBack(tensor, flat);
  }
  return c.finish(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const c10::Device device = deviceOf(tensors, "broadcast");
  TORCH_CHECK(tensors.size() == 1, "pccl broadcast: one tensor per process, got ", tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "pccl broadcast: root ", opts.rootRank,
              " is not a rank of a group of ", size_);
  Collective c = begin("broadcast", c10d::OpType::BROADCAST, device,
                  signatureOf("broadcast", tensors, "root " + std::to_string(opts.rootRank)));
  const at::Tensor& tensor = tensors[0];
  c.uses(tensor);
  const bool root = rank_ == opts.rootRank;
  const at::Tensor flat = root ? denseFlat(tensor) : outputFlat(tensor);
  const size_t es = flat.element_size();
  const int64_t round = roundElements(c, flat, 1);
  for (int64_t start = 0; start < flat.numel(); start += round) {
    const int64_t count = std::min(round, flat.numel() - start);
    if (root) c.toHost(c.sendPayload(), flat, start * es, count * es);
    c.broadcast(count * es, opts.rootRank);
    if (!root) c.toDevice(flat, start * es, c.receivedPayload(opts.rootRank), count * es);
  }
  if (!root) writeBack(tensor, flat);
  return c.finish(tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const c10::Device device = deviceOf(tensors, "reduce");
  TORCH_CHECK(tensors.size() == 1, "pccl reduce: one tensor per process, got ", tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "pccl reduce: root ", opts.rootRank,
              " is not a rank of a group of ", size_);
  checkReduceOp("reduce", opts.reduceOp, tensors);
  Collective c = begin("reduce", c10d::OpType::REDUCE, device,
                  signatureOf("reduce", tensors, reduceOpName(opts.reduceOp) + " root " + std::to_string(opts.rootRank)));
  const at::Tensor& tensor = tensors[0];
  c.uses(tensor);
  const at::Tensor flat = outputFlat(tensor);
  if (!tensor.is_contiguous()) flat.copy_(tensor.reshape(-1));
  const size_t es = flat.element_size();
  const int64_t round = roundElements(c, flat, 1);
  for (int64_t start = 0; start < flat.numel(); start += round) {
    const int64_t count = std::min(round, flat.numel() - start);
    c.toHost(c.sendPayload(), flat, start * es, count * es);
    c.allgather(count * es);
    if (rank_ != opts.rootRank) continue;
    reduceInto(flat.narrow(0, start, count), receivedRows(c, 0, count, flat.options()), opts.reduceOp);
  }
  if (rank_ == opts.rootRank) writeBack(tensor, flat);
  return c.finish(tensors);
}

namespace {

void checkSameKind(const char* collective, const at::Tensor& input, const std::vector<at::Tensor>& outputs,
                   int64_t expected_numel) {
  for (const at::Tensor& output : outputs) {
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "pccl ", collective, ": output dtype ",
                output.scalar_type(), " differs from the input's ", input.scalar_type());
    TORCH_CHECK(output.numel() == expected_numel, "pccl ", collective, ": each output must hold ", expected_numel,
                " elements (", shortType(input), " in), got ", shortType(output));
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  const c10::Device device = deviceOf(inputs, "allgather");
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "pccl allgather: one input and one output list per process");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "pccl allgather: the output list must hold ", size_,
              " tensors (one per rank), got ", outputs[0].size());
  deviceOf(outputs[0], "allgather");
  checkSameKind("allgather", inputs[0], outputs[0], inputs[0].numel());
  Collective c = begin("allgather", c10d::OpType::ALLGATHER, device, signatureOf("allgather", inputs));
  c.uses(inputs[0]);
  std::vector<at::Tensor> flats;
  for (const at::Tensor& output : outputs[0]) {
    c.uses(output);
    flats.push_back(outputFlat(output));
  }
  allgatherFlat(c, denseFlat(inputs[0]), flats);
  for (int q = 0; q < size_; ++q) writeBack(outputs[0][q], flats[q]);
  return c.finish(outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outputs{output};
  std::vector<at::Tensor> inputs{input};
  return allgather_into_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  const c10::Device device = deviceOf(inputs, "all_gather_into_tensor");
  deviceOf(outputs, "all_gather_into_tensor");
  TORCH_CHECK(inputs.size() == outputs.size(), "pccl all_gather_into_tensor: ", inputs.size(), " inputs but ",
              outputs.size(), " outputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkSameKind("all_gather_into_tensor", inputs[i], {outputs[i]}, inputs[i].numel() * size_);
  }
  Collective c = begin("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, device,
                  signatureOf("all_gather_into_tensor", inputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    c.uses(inputs[i]);
    c.uses(outputs[i]);
    const at::Tensor flat = outputFlat(outputs[i]);
    std::vector<at::Tensor> parts;
    for (int q = 0; q < size_; ++q) parts.push_back(flat.narrow(0, q * inputs[i].numel(), inputs[i].numel()));
    allgatherFlat(c, denseFlat(inputs[i]), parts);
    writeBack(outputs[i], flat);
  }
  return c.finish(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  const c10::Device device = deviceOf(inputs, "allgather_coalesced");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "pccl allgather_coalesced: ", size_,
              " output lists (one per rank) expected, got ", outputs.size());
  std::vector<at::Tensor> all_outputs;
  for (auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "pccl allgather_coalesced: each output list must hold ",
                inputs.size(), " tensors, got ", list.size());
    deviceOf(list, "allgather_coalesced");
    for (size_t i = 0; i < list.size(); ++i) checkSameKind("allgather_coalesced", inputs[i], {list[i]}, inputs[i].numel());
    all_outputs.insert(all_outputs.end(), list.begin(), list.end());
  }
  Collective c = begin("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, device,
                  signatureOf("allgather_coalesced", inputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    c.uses(inputs[i]);
    std::vector<at::Tensor> flats;
    for (int q = 0; q < size_; ++q) {
      c.uses(outputs[q][i]);
      flats.push_back(outputFlat(outputs[q][i]));
    }
    allgatherFlat(c, denseFlat(inputs[i]), flats);
    for (int q = 0; q < size_; ++q) writeBack(outputs[q][i], flats[q]);
  }
  return c.finish(all_outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  const c10::Device device = deviceOf(inputs, "gather");
  TORCH_CHECK(inputs.size() == 1, "pccl gather: one input per process, got ", inputs.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "pccl gather: root ", opts.rootRank,
              " is not a rank of a group of ", size_);
  const bool root = rank_ == opts.rootRank;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "pccl gather: the root needs one output list of ", size_, " tensors");
    deviceOf(outputs[0], "gather");
    checkSameKind("gather", inputs[0], outputs[0], inputs[0].numel());
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "pccl gather: only the root (rank ", opts.rootRank,
                ") passes output tensors");
  }
  Collective c = begin("gather", c10d::OpType::GATHER, device,
                  signatureOf("gather", inputs, "root " + std::to_string(opts.rootRank)));
  c.uses(inputs[0]);
  std::vector<at::Tensor> flats(static_cast<size_t>(size_));
  if (root) {
    for (int q = 0; q < size_; ++q) {
      c.uses(outputs[0][q]);
      flats[q] = outputFlat(outputs[0][q]);
    }
  }
  allgatherFlat(c, denseFlat(inputs[0]), flats);
  if (root) {
    for (int q = 0; q < size_; ++q) writeBack(outputs[0][q], flats[q]);
    return c.finish(outputs[0]);
  }
  return c.finish({});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  const c10::Device device = deviceOf(outputs, "scatter");
  TORCH_CHECK(outputs.size() == 1, "pccl scatter: one output per process, got ", outputs.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "pccl scatter: root ", opts.rootRank,
              " is not a rank of a group of ", size_);
  const bool root = rank_ == opts.rootRank;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "pccl scatter: the root needs one input list of ", size_, " tensors");
    deviceOf(inputs[0], "scatter");
    checkSameKind("scatter", outputs[0], inputs[0], outputs[0].numel());
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "pccl scatter: only the root (rank ", opts.rootRank,
                ") passes input tensors");
  }
  Collective c = begin("scatter", c10d::OpType::SCATTER, device,
                  signatureOf("scatter", outputs, "root " + std::to_string(opts.rootRank)));
  const at::Tensor& output = outputs[0];
  c.uses(output);
  std::vector<at::Tensor> sources;
  if (root) {
    for (const at::Tensor& input : inputs[0]) {
      c.uses(input);
      sources.push_back(denseFlat(input));
    }
  }
  const at::Tensor flat = outputFlat(output);
  const size_t es = flat.element_size();
  const int64_t round = roundElements(c, flat, size_);
  for (int64_t start = 0; start < flat.numel(); start += round) {
    const int64_t count = std::min(round, flat.numel() - start);
    if (root) {
      for (int q = 0; q < size_; ++q) c.toHost(c.sendPayload() + q * count * es, sources[q], start * es, count * es);
    }
    c.broadcast(size_ * count * es, opts.rootRank);
    c.toDevice(flat, start * es, c.receivedPayload(opts.rootRank) + rank_ * count * es, count * es);
  }
  writeBack(output, flat);
  return c.finish(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  const c10::Device device = deviceOf(outputs, "reduce_scatter");
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "pccl reduce_scatter: one output and one list of ", size_, " inputs per process");
  deviceOf(inputs[0], "reduce_scatter");
  checkSameKind("reduce_scatter", outputs[0], inputs[0], outputs[0].numel());
  checkReduceOp("reduce_scatter", opts.reduceOp, outputs);
  Collective c = begin("reduce_scatter", c10d::OpType::REDUCE_SCATTER, device,
                  signatureOf("reduce_scatter", outputs, reduceOpName(opts.reduceOp)));
  std::vector<at::Tensor> sources;
  for (const at::Tensor& input : inputs[0]) {
    c.uses(input);
    sources.push_back(denseFlat(input));
  }
  c.uses(outputs[0]);
  const at::Tensor flat = outputFlat(outputs[0]);
  reduceScatterFlat(c, sources, flat, opts.reduceOp);
  writeBack(outputs[0], flat);
  return c.finish(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outputs{output};
  std::vector<at::Tensor> inputs{input};
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const c10::Device device = deviceOf(outputs, "reduce_scatter_tensor");
  deviceOf(inputs, "reduce_scatter_tensor");
  TORCH_CHECK(inputs.size() == outputs.size(), "pccl reduce_scatter_tensor: ", inputs.size(), " inputs but ",
              outputs.size(), " outputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkSameKind("reduce_scatter_tensor", outputs[i], {inputs[i]}, outputs[i].numel() * size_);
  }
  checkReduceOp("reduce_scatter_tensor", opts.reduceOp, outputs);
  Collective c = begin("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, device,
                  signatureOf("reduce_scatter_tensor", outputs, reduceOpName(opts.reduceOp)));
  for (size_t i = 0; i < inputs.size(); ++i) {
    c.uses(inputs[i]);
    c.uses(outputs[i]);
    const at::Tensor source = denseFlat(inputs[i]);
    std::vector<at::Tensor> parts;
    for (int q = 0; q < size_; ++q) parts.push_back(source.narrow(0, q * outputs[i].numel(), outputs[i].numel()));
    const at::Tensor flat = outputFlat(outputs[i]);
    reduceScatterFlat(c, parts, flat, opts.reduceOp);
    writeBack(outputs[i], flat);
  }
  return c.finish(outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPCCL::barrier(const c10d::BarrierOptions& opts) {
  const c10::Device device = defaultDevice();
  Collective c = begin("barrier", c10d::OpType::BARRIER, device, "barrier");
  c.barrier();
  return c.finish({}, /*blocks_host=*/true);
}

}  // namespace pto::distributed
