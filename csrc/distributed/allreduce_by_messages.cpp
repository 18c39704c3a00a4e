#include "distributed/allreduce_by_messages.h"

#include <algorithm>

#include "distributed/gloo_transport.h"
#include "distributed/reductions.h"

namespace pto::distributed {
namespace {

// At least this many chunks where the parts stay above kMinPartBytes: the
// pipeline's depth.
constexpr int64_t kPipelineChunks = 4;
// Below this a message costs more in latency (a round trip of Gloo's rendezvous
// each) than the overlap gains. 4 ranks on 2 cores, a 1 MiB allreduce against
// Gloo's time: parts of 64 KiB 1.36-1.44, of 256 KiB 0.93-1.02, one chunk of
// 256 KiB parts (this bound) 0.95-0.99; 4 MiB: 1.3, 1.15, 1.0-1.1.
constexpr size_t kMinPartBytes = size_t{1} << 20;

size_t alignUp(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Where a chunk's parts lie: the chunk is cut into one part per rank (the last
// parts of the last chunk may be empty).
struct Chunk {
  int64_t start;  // its first element in the tensor
  int64_t part;   // elements per part
  int64_t count;  // elements in the chunk
  int64_t begin(int q) const { return start + std::min<int64_t>(count, q * part); }
  int64_t length(int q) const { return std::clamp<int64_t>(count - q * part, 0, part); }
};

// The host memory of one allreduce, in regions of slots:
//   headers    each peer's header, received;
//   arriving   per chunk and peer, the part this rank reduces, received;
// and where the host does not reach device memory (staged), per chunk:
//   outgoing   per peer, the part sent to it in the reduce-scatter, and the
//              reduced part received from it in the allgather;
//   reduced    this rank's reduced part, sent to every peer.
// A receive before the headers are checked has room for the largest message any
// rank may send (the transport's capacity): a rank that disagrees on the shapes
// cannot write past it. The allgather comes after every peer's header checked out.
struct Layout {
  int n, me;
  int64_t chunks;
  size_t capacity;     // a slot that receives before the check
  size_t part_stride;  // any other slot
  bool staged;
  uint8_t* base = nullptr;

  // The peers in the order this rank sends to them: the ranks after it first.
  int peer(int i) const { return (me + 1 + i) % n; }
  int index(int peer) const { return (peer - me - 1 + n) % n; }
  size_t peers() const { return static_cast<size_t>(n - 1); }
  uint8_t* headers(int i) const { return base + i * capacity; }
  uint8_t* ownHeader() const { return base + peers() * capacity; }
  uint8_t* arriving(int64_t k, int i) const {
    return ownHeader() + kHeaderBytes + (k * peers() + i) * capacity;
  }
  uint8_t* outgoing(int64_t k, int i) const {
    return ownHeader() + kHeaderBytes + chunks * peers() * capacity + (k * peers() + i) * part_stride;
  }
  uint8_t* reduced(int64_t k) const {
    return ownHeader() + kHeaderBytes + chunks * peers() * (capacity + part_stride) + k * part_stride;
  }
  size_t bytes() const {
    const size_t always = peers() * capacity + kHeaderBytes + chunks * peers() * capacity;
    return always + (staged ? chunks * n * part_stride : 0);
  }
};

// The messages in flight, shared by the host functions of one allreduce.
struct Rounds {
  uint32_t tag = 0;  // the headers'; chunk k: reduce-scatter tag + 1 + 2k, allgather tag + 2 + 2k
  std::vector<GlooTransport::Message> headers;
  std::vector<std::vector<GlooTransport::Message>> reduce_scatter, allgather;

  void abortAll() {
    GlooTransport::abort(headers);
    for (auto* phase : {&reduce_scatter, &allgather}) {
      for (auto& messages : *phase) GlooTransport::abort(messages);
    }
  }
};

// A host function of the allreduce: whatever it throws first aborts every
// message of the allreduce still in flight, so that none outlives the failure.
template <typename Step>
std::function<void(Transport&, TransferStatus&)> guarded(std::shared_ptr<Rounds> rounds, Step step) {
  return [rounds, step](Transport& transport, TransferStatus&) {
    try {
      step(static_cast<GlooTransport&>(transport));
    } catch (...) {
      rounds->abortAll();
      throw;
    }
  };
}

}  // namespace

std::shared_ptr<uint8_t[]> HostStaging::atLeast(size_t bytes) {
  if (bytes > bytes_) {
    // Left uninitialised: only the bytes an allreduce moves are ever touched.
    memory_ = std::shared_ptr<uint8_t[]>(new uint8_t[bytes]);
    bytes_ = bytes;
  }
  return memory_;
}

void allreduceByMessages(Collective& c, const at::Tensor& flat, const c10d::ReduceOp& op, HostStaging& staging) {
  const int n = c.size(), me = c.rank();
  const size_t es = flat.element_size();
  const int64_t numel = flat.numel();
  const int64_t max_part = static_cast<int64_t>(c.payloadCapacity() / es);
  const int64_t min_part = static_cast<int64_t>(kMinPartBytes / es);
  const int64_t part =
      std::min(max_part, std::max(min_part, (numel + n * kPipelineChunks - 1) / (n * kPipelineChunks)));
  const int64_t chunk_elements = part * n;
  const int64_t chunks = (numel + chunk_elements - 1) / chunk_elements;
  auto chunk = [&](int64_t k) {
    const int64_t start = k * chunk_elements;
    const int64_t count = std::min(chunk_elements, numel - start);
    return Chunk{start, (count + n - 1) / n, count};
  };
  // Where messages leave from and arrive: the tensor itself, or host slots.
  auto* device_bytes = static_cast<uint8_t*>(flat.data_ptr());
  const bool staged = !c.hostReadsDevice();

  Layout layout{n, me, chunks, c.payloadCapacity() + kHeaderBytes, alignUp(part * es), staged};
  const std::shared_ptr<uint8_t[]> memory = staging.atLeast(layout.bytes());
  c.keepAlive(memory);
  layout.base = memory.get();
  auto rounds = std::make_shared<Rounds>();
  rounds->reduce_scatter.resize(chunks);
  rounds->allgather.resize(chunks);
  const uint64_t sequence = c.sequence();
  const std::string signature = c.signature();

  // Reduce-scatter: each chunk's parts go to the ranks that reduce them, after
  // the headers (which the first chunk's messages are checked against).
  for (int64_t k = 0; k < chunks; ++k) {
    const Chunk ck = chunk(k);
    for (int i = 0; i < n - 1 && staged; ++i) {
      const int q = layout.peer(i);
      c.toHost(layout.outgoing(k, i), flat, ck.begin(q) * es, ck.length(q) * es);
    }
    c.hostTransfer(guarded(rounds, [=](GlooTransport& tcp) {
      if (k == 0) {
        rounds->tag = tcp.reserveTags(static_cast<uint32_t>(1 + 2 * chunks));
        writeHeader(layout.ownHeader(), sequence, signature);
        tcp.startWithEveryPeer(
            rounds->tag, [&](int peer) { return layout.headers(layout.index(peer)); }, layout.ownHeader(),
            kHeaderBytes, rounds->headers);
      }
      const uint32_t tag = rounds->tag + static_cast<uint32_t>(1 + 2 * k);
      auto& messages = rounds->reduce_scatter[k];
      for (int i = 0; i < n - 1; ++i) {
        if (ck.length(me) > 0) {
          messages.push_back(tcp.startReceive(layout.peer(i), tag, layout.arriving(k, i), layout.capacity));
        }
      }
      for (int i = 0; i < n - 1; ++i) {
        const int q = layout.peer(i);
        if (ck.length(q) == 0) continue;
        const void* from = staged ? layout.outgoing(k, i) : device_bytes + ck.begin(q) * es;
        messages.push_back(tcp.startSend(q, tag, from, ck.length(q) * es));
      }
    }));
  }

  // This rank's part of each chunk, reduced as it arrives (its own contribution
  // first, then the others' in rank order), then sent to every peer.
  for (int64_t k = 0; k < chunks; ++k) {
    const Chunk ck = chunk(k);
    const int64_t mine = ck.length(me);
    c.hostTransfer(guarded(rounds, [=](GlooTransport& tcp) {
      if (k == 0) {
        tcp.finish(rounds->tag, "allreduce headers", rounds->headers);
        for (int i = 0; i < n - 1; ++i) checkHeader(layout.headers(i), layout.peer(i), sequence, signature);
      }
      tcp.finish(rounds->tag + static_cast<uint32_t>(1 + 2 * k),
                 "allreduce chunk " + std::to_string(k) + " (reduce-scatter)", rounds->reduce_scatter[k]);
    }));
    if (mine > 0) {
      const at::Tensor own = flat.narrow(0, ck.begin(me), mine);
      std::vector<at::Tensor> rows{own};
      const at::Tensor arrived = c.deviceReadsHost() ? at::Tensor() : at::empty({n - 1, mine}, flat.options());
      for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        const int i = layout.index(r);
        if (arrived.defined()) {
          c.toDevice(arrived, i * mine * es, layout.arriving(k, i), mine * es);
          rows.push_back(arrived[i]);
        } else {
          rows.push_back(c.hostTensor(layout.arriving(k, i), mine, flat.options()));
        }
      }
      reduceInto(own, rows, op);
      if (staged) c.toHost(layout.reduced(k), flat, ck.begin(me) * es, mine * es);
    }
    c.hostTransfer(guarded(rounds, [=](GlooTransport& tcp) {
      const uint32_t tag = rounds->tag + static_cast<uint32_t>(2 + 2 * k);
      auto& messages = rounds->allgather[k];
      for (int i = 0; i < n - 1; ++i) {
        const int q = layout.peer(i);
        if (ck.length(q) == 0) continue;
        void* into = staged ? layout.outgoing(k, i) : device_bytes + ck.begin(q) * es;
        messages.push_back(tcp.startReceive(q, tag, into, ck.length(q) * es));
      }
      const void* from = staged ? layout.reduced(k) : device_bytes + ck.begin(me) * es;
      for (int i = 0; i < n - 1 && mine > 0; ++i) {
        messages.push_back(tcp.startSend(layout.peer(i), tag, from, mine * es));
      }
    }));
  }

  // Allgather: every other rank's reduced part of each chunk, in place.
  for (int64_t k = 0; k < chunks; ++k) {
    const Chunk ck = chunk(k);
    c.hostTransfer(guarded(rounds, [=](GlooTransport& tcp) {
      tcp.finish(rounds->tag + static_cast<uint32_t>(2 + 2 * k),
                 "allreduce chunk " + std::to_string(k) + " (allgather)", rounds->allgather[k]);
    }));
    for (int i = 0; i < n - 1 && staged; ++i) {
      const int q = layout.peer(i);
      c.toDevice(flat, ck.begin(q) * es, layout.outgoing(k, i), ck.length(q) * es);
    }
  }
}

}  // namespace pto::distributed
