// The shared-memory transport (shm_transport.h).
//
// The segment
// -----------
//   SegmentHeader            magic, size, capacity, the group's aborted flag
//   RankControl × size       per rank: pid, arrival counter, left flag (a cache line each)
//   tables × size × 2        per rank and parity: {offset, count} per destination (alltoall)
//   slots × 2 × size         per parity and rank: `capacity` bytes of data
//
// The protocol
// ------------
// Every rank makes the same exchanges in the same order; they are numbered from 0,
// exchange 0 being the setup's (every rank has mapped the segment). A rank's `arrived`
// holds 1 + the number of the last exchange it entered. To make exchange k a rank
//   1. publishes what k carries: its data in its slot of set k % 2 (the caller wrote it
//      through sendBuffer(); an alltoall packs its blocks there itself), and for an
//      alltoall the blocks' offsets and counts in its table of parity k % 2;
//   2. stores arrived = k + 1 (release);
//   3. waits until every rank's arrived is at least k + 1 (acquire).
// Step 3 is the exchange's only barrier. Past it, everything every rank published for k
// is visible, and received(q) points straight into q's slot of set k % 2 (an alltoall
// copies its blocks out of the senders' slots before it returns).
//
// Why one barrier is enough: a caller reads what exchange k - 2 delivered only until it
// calls its next exchange, k - 1 (the Transport contract). A rank writes set k % 2 (slot
// and table) only once it returned from exchange k - 1, that is once every rank entered
// k - 1, so once every rank stopped reading k - 2, the last exchange that used the set.
// No rank can get further ahead: it cannot pass barrier k + 1 before every rank entered
// k + 1. So while a rank waits at k, a peer's arrived is k (not there yet) or k + 1
// (waiting too), and two slot sets suffice.
//
// Failures
// --------
// A waiting rank checks, every kLivenessCheckInterval, that the ranks it waits for are
// alive (their pid, their left flag), and on every turn the group's aborted flag. A dead
// or departed peer, the timeout, or an invalid call sets the aborted flag (so every other
// rank fails within one turn of its wait) and throws TransportError; from then on every
// exchange of this transport throws at once. The segment's name is unlinked by the first
// rank past the setup's barrier, or by any rank whose setup fails, so a killed group leaves
// nothing in /dev/shm.
#include "distributed/shm_transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace pto::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Shared by processes: an atomic that fell back on a lock would lock a lock of its own
// process only.
using SharedWord = std::atomic<uint64_t>;
static_assert(SharedWord::is_always_lock_free, "cross-process atomics must be lock-free");
static_assert(sizeof(SharedWord) == sizeof(uint64_t));

constexpr uint64_t kMagic = 0x316d'6873'6c63'6370;  // "pcclshm1"
constexpr size_t kCacheLine = 64;
constexpr size_t kPage = 4096;

// How a waiting rank spends its time: spinning costs nothing in latency but takes a
// core from the ranks it waits for when there are more ranks than cores, so it spins a
// few µs, then yields, then sleeps on a futex that every arrival wakes (so a long wait
// adds only a wake-up to the latency of the exchange that ends it), in slices of
// kLivenessCheckInterval at most.
constexpr auto kSpinFor = 5us;
constexpr auto kYieldFor = 50us;
constexpr auto kLivenessCheckInterval = 20ms;

// A 32-bit futex word in shared memory (FUTEX_WAIT without _PRIVATE: across processes).
using FutexWord = std::atomic<uint32_t>;
static_assert(FutexWord::is_always_lock_free && sizeof(FutexWord) == sizeof(uint32_t));

void futexWait(FutexWord& word, uint32_t seen, std::chrono::nanoseconds timeout) {
  const timespec relative{static_cast<time_t>(timeout.count() / 1'000'000'000),
                          static_cast<long>(timeout.count() % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &relative, nullptr, 0);
}

void futexWakeAll(FutexWord& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

struct alignas(kCacheLine) SegmentHeader {
  SharedWord magic;  // stored last by rank 0 (release): the fields below are set once it reads kMagic
  SharedWord size;
  SharedWord capacity;
  SharedWord aborted_by;  // 0 while the group is healthy, else 1 + the rank that aborted it
  FutexWord events;       // bumped by every arrival, abort and departure: what sleepers wait on
  FutexWord sleepers;     // ranks asleep on `events` (no wake-up syscall while there are none)
};

// A cache line per rank, so that one rank's arrival does not slow down another's.
struct alignas(kCacheLine) RankControl {
  SharedWord pid;
  SharedWord arrived;  // 1 + the number of the last exchange the rank entered
  SharedWord left;     // 1 once the rank destroyed its transport
};

size_t roundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Where each part of a segment for `size` ranks of `capacity` bytes lies.
struct Layout {
  size_t ranks_offset = 0;
  size_t tables_offset = 0;
  size_t slots_offset = 0;
  size_t slot_stride = 0;
  size_t total = 0;

  Layout(int size, size_t capacity) {
    const auto ranks = static_cast<size_t>(size);
    ranks_offset = sizeof(SegmentHeader);
    tables_offset = ranks_offset + ranks * sizeof(RankControl);
    slots_offset = roundUp(tables_offset + ranks * 2 * ranks * 2 * sizeof(uint64_t), kPage);
    size_t slot_bytes = 0;
    if (capacity > SIZE_MAX / 4 || __builtin_mul_overflow(roundUp(capacity, kCacheLine), 2 * ranks, &slot_bytes) ||
        __builtin_add_overflow(slots_offset, slot_bytes, &total)) {
      throw TransportError("shm transport: a segment for " + std::to_string(size) + " ranks of capacity " +
                           std::to_string(capacity) + " bytes does not fit in the address space");
    }
    slot_stride = roundUp(capacity, kCacheLine);
  }
};

struct Unmap {
  size_t bytes;
  void operator()(std::byte* base) const { munmap(base, bytes); }
};
using MappedSegment = std::unique_ptr<std::byte, Unmap>;

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errorText(int error) { return std::strerror(error); }

std::string seconds(std::chrono::milliseconds duration) {
  char text[32];
  const double value = std::chrono::duration<double>(duration).count();
  std::snprintf(text, sizeof text, value >= 1 ? "%.1f s" : "%.3g s", value);
  return text;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

// kill(pid, 0) finds a process until its parent reaps it, so an exited rank whose
// launcher has not waited for it yet (a zombie) is told apart by its state in /proc.
bool processIsAlive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t command_end = line.rfind(')');
  if (command_end == std::string::npos || command_end + 2 >= line.size()) return true;
  const char state = line[command_end + 2];
  return state != 'Z' && state != 'X';
}

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Tells sleeping ranks that something they may wait for happened.
void announce(SegmentHeader& header) {
  header.events.fetch_add(1);
  if (header.sleepers.load() != 0) futexWakeAll(header.events);
}

// One wait's pacing: see kSpinFor.
class Backoff {
 public:
  Backoff(Clock::time_point start, SegmentHeader& header) : start_(start), header_(header) {}

  // Waits a little, or until `done()` may have become true (the futex, at most
  // `longest`); returns the time after.
  template <typename Done>
  Clock::time_point pause(Done done, std::chrono::nanoseconds longest) {
    const auto waited = Clock::now() - start_;
    if (waited < kSpinFor) {
      for (int i = 0; i < 16; ++i) cpuRelax();
    } else if (waited < kYieldFor) {
      sched_yield();
    } else {
      // Registered as a sleeper before reading `events`: an arrival after the read
      // either changed `events` (the wait returns at once) or sees the sleeper and wakes it.
      header_.sleepers.fetch_add(1);
      const uint32_t seen = header_.events.load();
      if (!done()) futexWait(header_.events, seen, std::max<std::chrono::nanoseconds>(longest, 1us));
      header_.sleepers.fetch_sub(1);
    }
    return Clock::now();
  }

 private:
  Clock::time_point start_;
  SegmentHeader& header_;
};

std::string randomSegmentName() {
  std::random_device device;
  const uint64_t random = (static_cast<uint64_t>(device()) << 32) | device();
  char name[64];
  std::snprintf(name, sizeof name, "/pccl-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(random));
  return name;
}

MappedSegment mapSegment(int fd, const Layout& layout, const std::string& name, const std::string& context) {
  void* base = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    throw TransportError(context + ": mmap of segment " + name + " (" + std::to_string(layout.total) +
                         " bytes) failed: " + errorText(errno));
  }
  return MappedSegment(static_cast<std::byte*>(base), Unmap{layout.total});
}

// Rank 0's segment, its memory reserved: /dev/shm (a tmpfs) hands out pages when they are
// first touched, and one it no longer has would be a SIGBUS in the middle of an exchange.
MappedSegment createSegment(const std::string& name, const Layout& layout, int size, size_t capacity,
                            const std::string& context) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw TransportError(context + ": shm_open(" + name + ") failed: " + errorText(errno));
  FileDescriptor file(fd);
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(layout.total)); error != 0) {
    shm_unlink(name.c_str());
    throw TransportError(context + ": cannot reserve " + std::to_string(layout.total) + " bytes in /dev/shm (" +
                         std::to_string(size) + " ranks × 2 × capacity " + std::to_string(capacity) +
                         " + control): posix_fallocate: " + errorText(error) +
                         "; give /dev/shm more room (docker --shm-size) or the transport a smaller capacity");
  }
  try {
    return mapSegment(fd, layout, name, context);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
}

// Another rank's view of the segment rank 0 created, checked to be one for this group's
// size and capacity before anything in it is read.
MappedSegment openSegment(const std::string& name, const Layout& layout, int size, size_t capacity,
                          const std::string& context) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int error = errno;
    throw TransportError(context + ": shm_open(" + name + ") failed: " + errorText(error) +
                         (error == ENOENT ? " (the group gave up its setup before this rank arrived)" : ""));
  }
  FileDescriptor file(fd);
  struct stat status {};
  if (fstat(fd, &status) != 0) throw TransportError(context + ": fstat of segment " + name + ": " + errorText(errno));
  if (static_cast<size_t>(status.st_size) != layout.total) {
    throw TransportError(context + ": segment " + name + " has " + std::to_string(status.st_size) +
                         " bytes where this rank expects " + std::to_string(layout.total) +
                         ": do all ranks pass the same size and capacity?");
  }
  MappedSegment segment = mapSegment(fd, layout, name, context);
  const auto* header = reinterpret_cast<const SegmentHeader*>(segment.get());
  if (header->magic.load(std::memory_order_acquire) != kMagic ||
      header->size.load(std::memory_order_relaxed) != static_cast<uint64_t>(size) ||
      header->capacity.load(std::memory_order_relaxed) != capacity) {
    throw TransportError(context + ": segment " + name + " is not one for " + std::to_string(size) +
                         " ranks of capacity " + std::to_string(capacity));
  }
  return segment;
}

class ShmTransport final : public Transport {
 public:
  ShmTransport(int rank, int size, std::string group_key, std::chrono::milliseconds timeout, size_t capacity,
               const Layout& layout, MappedSegment segment, std::string segment_name)
      : rank_(rank),
        size_(size),
        group_key_(std::move(group_key)),
        timeout_(timeout),
        capacity_(capacity),
        layout_(layout),
        segment_(std::move(segment)),
        unlink_pending_(std::move(segment_name)) {
    std::byte* base = segment_.get();
    if (rank_ == 0) {
      header_ = new (base) SegmentHeader{};
      header_->size.store(static_cast<uint64_t>(size_), std::memory_order_relaxed);
      header_->capacity.store(capacity_, std::memory_order_relaxed);
      ranks_ = reinterpret_cast<RankControl*>(base + layout_.ranks_offset);
      for (int r = 0; r < size_; ++r) new (&ranks_[r]) RankControl{};
    } else {
      header_ = std::launder(reinterpret_cast<SegmentHeader*>(base));
      ranks_ = std::launder(reinterpret_cast<RankControl*>(base + layout_.ranks_offset));
    }
    ranks_[rank_].pid.store(static_cast<uint64_t>(getpid()), std::memory_order_release);
    if (rank_ == 0) header_->magic.store(kMagic, std::memory_order_release);
  }

  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  ~ShmTransport() override {
    ranks_[rank_].left.store(1, std::memory_order_release);
    announce(*header_);
    unlinkSegmentName();
  }

  // Exchange 0: every rank has mapped the segment, so its name can go.
  void attach() {
    throwIfAborted("setup");
    arriveAndWait("setup");
    ++exchange_;
    unlinkSegmentName();
  }

  const char* name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t capacity() const override { return capacity_; }
  // The interface numbers exchanges from 0; internally the setup is exchange 0.
  uint64_t exchanges() const override { return exchange_ - 1; }
  void* sendBuffer(uint64_t exchange) override { return slot(exchange + 1, rank_); }

  void allgather(size_t bytes) override {
    const char* what = "allgather";
    throwIfAborted(what);
    checkFits(what, bytes);
    arriveAndWait(what);
    ++exchange_;
  }

  void broadcast(size_t bytes, int root) override {
    const char* what = "broadcast";
    throwIfAborted(what);
    if (root < 0 || root >= size_) fail(what, "root " + std::to_string(root) + " is not a rank of the group");
    checkFits(what, bytes);
    arriveAndWait(what);
    ++exchange_;
  }

  // Rounds of one exchange each, at most capacity / size bytes per block, packed into
  // this rank's slot; each rank copies its blocks out of the senders' slots.
  void alltoall(const size_t* send_counts, const size_t* recv_counts, size_t largest, const void* input,
                void* output) override {
    const char* what = "alltoall";
    throwIfAborted(what);
    const size_t n = static_cast<size_t>(size_);
    std::vector<size_t> send_offsets(n), recv_offsets(n), sending(n), receiving(n);
    std::exclusive_scan(send_counts, send_counts + n, send_offsets.begin(), size_t{0});
    std::exclusive_scan(recv_counts, recv_counts + n, recv_offsets.begin(), size_t{0});
    const size_t block = std::max<size_t>(capacity_ / n, 1);
    for (size_t done = 0; done < largest; done += block) {
      for (size_t q = 0; q < n; ++q) {
        sending[q] = std::min(block, send_counts[q] - std::min(send_counts[q], done));
        receiving[q] = std::min(block, recv_counts[q] - std::min(recv_counts[q], done));
      }
      alltoallRound(
          sending, receiving, [&](int q) { return static_cast<const std::byte*>(input) + send_offsets[q] + done; },
          [&](int q) { return static_cast<std::byte*>(output) + recv_offsets[q] + done; });
    }
  }

  const void* received(uint64_t exchange, int rank) const override {
    if (rank < 0 || rank >= size_) {
      throw std::out_of_range("shm transport: received(" + std::to_string(rank) + ") of a group of " +
                              std::to_string(size_) + " ranks");
    }
    return slot(exchange + 1, rank);
  }

  void barrier() override {
    const char* what = "barrier";
    throwIfAborted(what);
    arriveAndWait(what);
    ++exchange_;
  }

 private:
  // One exchange of an alltoall: sending[q] bytes from `from(q)` to each rank q,
  // receiving[q] bytes from each rank q into `into(q)`.
  template <typename From, typename Into>
  void alltoallRound(const std::vector<size_t>& sending, const std::vector<size_t>& receiving, From from, Into into) {
    const char* what = "alltoall";
    throwIfAborted(what);
    uint64_t* published = table(exchange_, rank_);
    std::byte* packed = slot(exchange_, rank_);
    size_t offset = 0;
    for (int q = 0; q < size_; ++q) {
      std::memcpy(packed + offset, from(q), sending[q]);
      published[2 * q] = offset;
      published[2 * q + 1] = sending[q];
      offset += sending[q];
    }
    arriveAndWait(what);
    for (int q = 0; q < size_; ++q) {
      const uint64_t* theirs = table(exchange_, q);
      const uint64_t count = theirs[2 * rank_ + 1];
      if (count != receiving[q]) {
        fail(what, "rank " + std::to_string(q) + " sends " + std::to_string(count) + " bytes to rank " +
                       std::to_string(rank_) + ", which expects " + std::to_string(receiving[q]));
      }
      std::memcpy(into(q), slot(exchange_, q) + theirs[2 * rank_], count);
    }
    ++exchange_;
  }

  std::byte* slot(uint64_t exchange, int rank) const {
    const size_t index = static_cast<size_t>(exchange % 2) * size_ + rank;
    return segment_.get() + layout_.slots_offset + index * layout_.slot_stride;
  }

  // Rank `rank`'s {offset, count} per destination for the exchanges of `exchange`'s parity.
  uint64_t* table(uint64_t exchange, int rank) const {
    const size_t index = (static_cast<size_t>(rank) * 2 + exchange % 2) * size_ * 2;
    return reinterpret_cast<uint64_t*>(segment_.get() + layout_.tables_offset) + index;
  }

  // Exchanges as the interface numbers them (the setup is internal exchange 0).
  std::string describe(const char* what) const {
    const std::string step = exchange_ == 0 ? std::string("setup") : "exchange " + std::to_string(exchange_ - 1) + " (" + what + ")";
    return "shm transport: " + step + " of group '" + group_key_ + "'";
  }

  void checkFits(const char* what, size_t bytes) {
    if (bytes > capacity_) {
      fail(what, std::to_string(bytes) + " bytes exceed the capacity of " + std::to_string(capacity_) + " bytes");
    }
  }

  void throwIfAborted(const char* what) {
    if (!first_error_.empty()) throw TransportError(describe(what) + ": the group was aborted: " + first_error_);
    if (const uint64_t aborted_by = header_->aborted_by.load(std::memory_order_acquire); aborted_by != 0) {
      fail(what, "rank " + std::to_string(aborted_by - 1) + " aborted the group");
    }
  }

  // Aborts the group (unless a peer already did) and throws; every later call repeats why.
  [[noreturn]] void fail(const char* what, const std::string& reason) {
    const std::string message = describe(what) + ": " + reason;
    uint64_t healthy = 0;
    header_->aborted_by.compare_exchange_strong(healthy, static_cast<uint64_t>(rank_) + 1, std::memory_order_acq_rel);
    announce(*header_);
    first_error_ = message;
    unlinkSegmentName();
    throw TransportError(message);
  }

  // The barrier of exchange exchange_ (see the protocol at the top of the file).
  void arriveAndWait(const char* what) {
    const uint64_t arrival = exchange_ + 1;
    ranks_[rank_].arrived.store(arrival, std::memory_order_seq_cst);
    announce(*header_);
    const auto start = Clock::now();
    auto next_liveness_check = start + kLivenessCheckInterval;
    Backoff backoff(start, *header_);
    int first_missing = 0;  // arrivals only grow, so the ranks before it need no second look
    auto everyoneArrived = [&] {
      while (first_missing < size_ && ranks_[first_missing].arrived.load(std::memory_order_acquire) >= arrival) {
        ++first_missing;
      }
      return first_missing == size_ || header_->aborted_by.load(std::memory_order_acquire) != 0;
    };
    for (;;) {
      everyoneArrived();
      if (first_missing == size_) return;
      if (const uint64_t aborted_by = header_->aborted_by.load(std::memory_order_acquire); aborted_by != 0) {
        // Most aborts are over a peer that is gone: name it, as the rank that aborted did.
        const int aborting_rank = static_cast<int>(aborted_by - 1);
        failIfAPeerIsGone(what, arrival, first_missing, aborting_rank);
        fail(what, "rank " + std::to_string(aborting_rank) + " aborted the group");
      }
      const auto now = backoff.pause(everyoneArrived, next_liveness_check - Clock::now());
      if (now >= next_liveness_check) {
        failIfAPeerIsGone(what, arrival, first_missing);
        next_liveness_check = now + kLivenessCheckInterval;
      }
      if (now - start >= timeout_) {
        fail(what, "ranks " + rankList(missingRanks(arrival, first_missing)) + " did not arrive within " +
                       seconds(timeout_));
      }
    }
  }

  std::vector<int> missingRanks(uint64_t arrival, int first_missing) const {
    std::vector<int> missing;
    for (int r = first_missing; r < size_; ++r) {
      if (ranks_[r].arrived.load(std::memory_order_acquire) < arrival) missing.push_back(r);
    }
    return missing;
  }

  // A peer that has not published its pid yet (during the setup) is only covered by the
  // timeout. `except_rank` (the rank that aborted the group, which may well be gone since)
  // is not named.
  void failIfAPeerIsGone(const char* what, uint64_t arrival, int first_missing, int except_rank = -1) {
    std::string gone;
    for (const int r : missingRanks(arrival, first_missing)) {
      if (r == except_rank) continue;
      const auto pid = static_cast<pid_t>(ranks_[r].pid.load(std::memory_order_acquire));
      const std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ")";
      if (ranks_[r].left.load(std::memory_order_acquire) != 0) {
        gone += (gone.empty() ? "" : "; ") + who + " destroyed its transport";
      } else if (pid != 0 && !processIsAlive(pid)) {
        gone += (gone.empty() ? "" : "; ") + who + " exited";
      }
    }
    if (!gone.empty()) fail(what, gone);
  }

  // Any rank may do it, the first one wins: once a rank is past the setup every rank has
  // mapped the segment; a failed setup takes the name with it.
  void unlinkSegmentName() {
    if (unlink_pending_.empty()) return;
    shm_unlink(unlink_pending_.c_str());
    unlink_pending_.clear();
  }

  const int rank_;
  const int size_;
  const std::string group_key_;
  const std::chrono::milliseconds timeout_;
  const size_t capacity_;
  const Layout layout_;
  const MappedSegment segment_;
  std::string unlink_pending_;  // the segment's name until this rank unlinked it
  SegmentHeader* header_ = nullptr;
  RankControl* ranks_ = nullptr;
  uint64_t exchange_ = 0;  // the number of the next exchange
  std::string first_error_;  // why this transport failed; empty while it works
};

}  // namespace

// What rank 0 publishes instead of a segment's name when it could not create one.
const std::string kCreateFailed = "failed: ";

std::unique_ptr<Transport> makeShmTransport(int rank, int size, const Rendezvous& rendezvous,
                                            const std::string& group_key, std::chrono::milliseconds timeout,
                                            size_t capacity) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::invalid_argument("shm transport: rank " + std::to_string(rank) + " of a group of " +
                                std::to_string(size));
  }
  if (capacity == 0) throw std::invalid_argument("shm transport: the capacity must be at least one byte");
  const Layout layout(size, capacity);
  const std::string context = "shm transport: setup of group '" + group_key + "' (rank " + std::to_string(rank) +
                              " of " + std::to_string(size) + ")";
  const std::string name_key = group_key + "/shm_name";
  std::unique_ptr<ShmTransport> transport;
  if (rank == 0) {
    std::string name = randomSegmentName();
    MappedSegment segment;
    try {
      segment = createSegment(name, layout, size, capacity, context);
    } catch (const TransportError& error) {
      // The other ranks wait for a name: give them the failure instead, so that every
      // rank fails (and may fall back to another transport) at once.
      rendezvous.set(name_key, kCreateFailed + std::string(error.what()));
      throw;
    }
    transport = std::make_unique<ShmTransport>(rank, size, group_key, timeout, capacity, layout, std::move(segment),
                                               name);
    rendezvous.set(name_key, name);
  } else {
    std::string name;
    try {
      name = rendezvous.get(name_key);
    } catch (const TransportError& error) {
      throw TransportError(context + ": waiting for rank 0 to publish the segment's name (" + name_key +
                           "): " + error.what());
    }
    if (name.rfind(kCreateFailed, 0) == 0) {
      throw TransportError(context + ": rank 0 could not create the segment: " + name.substr(kCreateFailed.size()));
    }
    MappedSegment segment = openSegment(name, layout, size, capacity, context);
    transport = std::make_unique<ShmTransport>(rank, size, group_key, timeout, capacity, layout, std::move(segment),
                                               std::move(name));
  }
  transport->attach();
  return transport;
}

}  // namespace pto::distributed
