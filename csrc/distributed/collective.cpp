#include "distributed/collective.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>

#include "torch/device.h"
#include "torch/pto_check.h"

namespace pto::distributed {
namespace {

struct Header {
  uint64_t sequence;
  char signature[kHeaderBytes - sizeof(uint64_t)];
};
static_assert(sizeof(Header) == kHeaderBytes);

}  // namespace

void writeHeader(void* at, uint64_t sequence, const std::string& signature) {
  Header header{};
  header.sequence = sequence;
  std::strncpy(header.signature, signature.c_str(), sizeof(header.signature) - 1);
  std::memcpy(at, &header, sizeof(header));
}

void checkHeader(const void* header, int rank, uint64_t sequence, const std::string& signature) {
  Header mine{};
  writeHeader(&mine, sequence, signature);
  Header theirs;
  std::memcpy(&theirs, header, sizeof(theirs));
  theirs.signature[sizeof(theirs.signature) - 1] = '\0';
  if (theirs.sequence != mine.sequence || std::strcmp(theirs.signature, mine.signature) != 0) {
    throw TransportError("rank " + std::to_string(rank) + " called " + theirs.signature + " as collective #" +
                         std::to_string(theirs.sequence) + " of the group, this rank called " + mine.signature +
                         " as collective #" + std::to_string(mine.sequence) +
                         ": every rank must call the same collectives in the same order, with the same shapes "
                         "and dtypes");
  }
}

void checkHeaders(Transport& transport, uint64_t exchange, const std::vector<int>& ranks, uint64_t sequence,
                  const std::string& signature) {
  for (int rank : ranks) checkHeader(transport.received(exchange, rank), rank, sequence, signature);
}

namespace {

struct TransferTask {
  std::shared_ptr<GroupChannel> channel;
  std::shared_ptr<TransferStatus> status;
  std::string collective;
  std::function<void(Transport&)> exchange;
};

const char* runTransfer(void* data) {
  std::unique_ptr<TransferTask> task(static_cast<TransferTask*>(data));
  thread_local std::string failure;
  failure = task->channel->run(task->collective, task->exchange);
  if (failure.empty()) return nullptr;
  task->status->finish(failure);
  return failure.c_str();
}

// The collective's last host function: everything it moved has arrived.
const char* runTransferFinish(void* data) {
  std::unique_ptr<TransferTask> task(static_cast<TransferTask*>(data));
  task->status->finish("");
  return nullptr;
}

struct KeepAlive {
  std::vector<std::shared_ptr<void>> owners;
};

const char* releaseKeepAlive(void* data) {
  delete static_cast<KeepAlive*>(data);
  return nullptr;
}

}  // namespace

std::string GroupChannel::run(const std::string& collective, const std::function<void(Transport&)>& transfer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) {
      return "pccl " + collective + " on group '" + group_name_ + "' (rank " + std::to_string(rank()) + " of " +
             std::to_string(size()) + "): the group failed earlier and is unusable (destroy it and create a new "
             "one): " + failure_;
    }
  }
  try {
    transfer(*transport_);
    return "";
  } catch (const std::exception& error) {
    std::string why = "pccl " + collective + " on group '" + group_name_ + "' (rank " +  std::to_string(rank()) +
                      " of " + std::to_string(size()) + ", " + transport_->name() + " transport): " + error.what();
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) failure_ = why;
    return why;
  }
}

Collective::Collective(std::shared_ptr<GroupChannel> channel, uint64_t* next_exchange, uint64_t sequence,
                       const char* name, c10d::OpType type, c10::Stream comm_stream, MemoryAccess access,
                       std::string signature)
    : channel_(std::move(channel)),
      next_exchange_(next_exchange),
      sequence_(sequence),
      name_(name),
      type_(type),
      comm_stream_(comm_stream),
      stream_(torch_glue::nativeStream(comm_stream)),
      signature_(std::move(signature)),
      access_(access),
      status_(std::make_shared<TransferStatus>()) {
  const c10::DeviceIndex device = comm_stream.device_index();
  ptoStream caller = torch_glue::nativeStream(torch_glue::currentStream(device));
  if (caller != stream_) {
    ptoEvent ready = nullptr;
    PTO_CHECK(ptoEventCreate(&ready));
    PTO_CHECK(ptoEventRecord(ready, caller));
    PTO_CHECK(ptoStreamWaitEvent(stream_, ready));
    PTO_CHECK(ptoEventDestroy(ready));
  }
  guard_ = std::make_unique<c10::StreamGuard>(comm_stream);
}

Collective::~Collective() {
  if (!finished_ && !keep_alive_.empty()) {
    // Queued copies may still use this memory: release it after them.
    ptoLaunchHostFunc(stream_, &releaseKeepAlive, new KeepAlive{std::move(keep_alive_)});
  }
}

uint8_t* Collective::sendPayload() const {
  return static_cast<uint8_t*>(channel_->transport().sendBuffer(*next_exchange_)) + kHeaderBytes;
}

const uint8_t* Collective::receivedPayload(int rank) const {
  return static_cast<const uint8_t*>(channel_->transport().received(*next_exchange_ - 1, rank)) + kHeaderBytes;
}

at::Tensor Collective::hostTensor(const void* data, int64_t count, const at::TensorOptions& options) const {
  TORCH_INTERNAL_ASSERT(access_.device_reads_host, "pccl: the device does not read host memory");
  // The device named outright: from_blob would ask the allocator which device owns the pointer.
  return at::for_blob(const_cast<void*>(data), {count})
      .options(options.device(comm_stream_.device()))
      .target_device(comm_stream_.device())
      .make_tensor();
}

void Collective::toHost(void* dst, const at::Tensor& src, size_t src_byte_offset, size_t bytes) {
  if (bytes == 0) return;
  const auto* from = static_cast<const uint8_t*>(src.const_data_ptr()) + src_byte_offset;
  PTO_CHECK(ptoMemcpyAsync(dst, from, bytes, PTO_MEMCPY_DEVICE_TO_HOST, stream_));
}

void Collective::toDevice(const at::Tensor& dst, size_t dst_byte_offset, const void* src, size_t bytes) {
  if (bytes == 0) return;
  auto* to = static_cast<uint8_t*>(dst.data_ptr()) + dst_byte_offset;
  PTO_CHECK(ptoMemcpyAsync(to, src, bytes, PTO_MEMCPY_HOST_TO_DEVICE, stream_));
}

void Collective::queueExchange(std::function<void(Transport&)> exchange) {
  ++*next_exchange_;
  auto* task = new TransferTask{channel_, status_, name_, std::move(exchange)};
  PTO_CHECK(ptoLaunchHostFunc(stream_, &runTransfer, task));
}

void Collective::allgather(size_t payload_bytes) {
  const uint64_t k = *next_exchange_;
  queueExchange([k, payload_bytes, sequence = sequence_, signature = signature_](Transport& transport) {
    writeHeader(transport.sendBuffer(k), sequence, signature);
    transport.allgather(kHeaderBytes + payload_bytes);
    std::vector<int> ranks(static_cast<size_t>(transport.size()));
    for (int r = 0; r < transport.size(); ++r) ranks[static_cast<size_t>(r)] = r;
    checkHeaders(transport, k, ranks, sequence, signature);
  });
}

void Collective::broadcast(size_t payload_bytes, int root) {
  const uint64_t k = *next_exchange_;
  queueExchange([k, payload_bytes, root, sequence = sequence_, signature = signature_](Transport& transport) {
    writeHeader(transport.sendBuffer(k), sequence, signature);
    transport.broadcast(kHeaderBytes + payload_bytes, root);
    checkHeaders(transport, k, {root}, sequence, signature);
  });
}

void Collective::barrier() {
  queueExchange([](Transport& transport) { transport.barrier(); });
}

void Collective::hostTransfer(std::function<void(Transport&, TransferStatus&)> transfer) {
  auto status = status_;
  auto* task = new TransferTask{channel_, status_, name_,
                                [transfer = std::move(transfer), status](Transport& transport) {
                                  transfer(transport, *status);
                                }};
  PTO_CHECK(ptoLaunchHostFunc(stream_, &runTransfer, task));
}

void Collective::uses(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage() || tensor.storage().data() == nullptr) return;
  c10::impl::getDeviceGuardImpl(tensor.device().type())
      ->recordDataPtrOnStream(tensor.storage().data_ptr(), comm_stream_);
}

c10::intrusive_ptr<WorkPCCL> Collective::finish(std::vector<at::Tensor> outputs, bool blocks_host) {
  // The last host function marks the transfers finished (for sourceRank(),
  // synchronize() and errors) and releases the host memory the copies used.
  auto* task = new TransferTask{channel_, status_, name_, nullptr};
  PTO_CHECK(ptoLaunchHostFunc(stream_, &runTransferFinish, task));
  if (!keep_alive_.empty()) {
    PTO_CHECK(ptoLaunchHostFunc(stream_, &releaseKeepAlive, new KeepAlive{std::move(keep_alive_)}));
  }
  ptoEvent done = nullptr;
  PTO_CHECK(ptoEventCreate(&done));
  PTO_CHECK(ptoEventRecord(done, stream_));
  for (const at::Tensor& output : outputs) uses(output);

  const c10::Device device = comm_stream_.device();
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                         std::vector<c10::Device>{device});
  future->markCompleted(c10::IValue(outputs));  // records its events on the communication stream (current)
  finished_ = true;
  guard_.reset();
  return c10::make_intrusive<WorkPCCL>(channel_->rank(), type_, name_, device, done, status_, std::move(outputs),
                                       std::move(future), blocks_host);
}

}  // namespace pto::distributed
