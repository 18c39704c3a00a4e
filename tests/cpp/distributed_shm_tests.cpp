// The shared-memory transport (csrc/distributed/shm_transport.h). Every rank is a forked
// process: its gtest assertions print as they fail, and its exit status tells the parent,
// which fails the test on any rank that did not exit with 0.
#include "distributed/shm_transport.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

namespace pto::distributed {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A rendezvous of one file per key in a fresh directory; set writes a file beside the
// final one and renames it, so get never reads half a value.
class FileRendezvous {
 public:
  FileRendezvous() {
    char directory[] = "/tmp/pccl-shm-test-XXXXXX";
    directory_ = mkdtemp(directory);
  }
  FileRendezvous(const FileRendezvous&) = delete;
  FileRendezvous& operator=(const FileRendezvous&) = delete;
  ~FileRendezvous() { fs::remove_all(directory_); }

  fs::path pathOf(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '%');
    return directory_ / key;
  }

  Rendezvous rendezvous(std::chrono::milliseconds timeout) const {
    Rendezvous result;
    result.set = [this](const std::string& key, const std::string& value) {
      const fs::path partial = pathOf(key).string() + ".partial" + std::to_string(getpid());
      std::ofstream(partial) << value;
      fs::rename(partial, pathOf(key));
    };
    result.get = [this, timeout](const std::string& key) {
      const auto deadline = Clock::now() + timeout;
      for (;;) {
        if (std::ifstream file(pathOf(key)); file) {
          std::string value;
          std::getline(file, value);
          return value;
        }
        if (Clock::now() > deadline) throw TransportError("file rendezvous: " + key + " was not set in time");
        std::this_thread::sleep_for(1ms);
      }
    };
    return result;
  }

 private:
  fs::path directory_;
};

// One group's rendezvous and key; the rendezvous keys are unique per test run.
struct Group {
  FileRendezvous files;
  std::string key = "test-" + std::to_string(getpid()) + "-" +
                    testing::UnitTest::GetInstance()->current_test_info()->name();

  std::unique_ptr<Transport> join(int rank, int size, size_t capacity = 4096,
                                  std::chrono::milliseconds timeout = 20s) const {
    return makeShmTransport(rank, size, files.rendezvous(timeout), key, timeout, capacity);
  }

  // The segment's path in /dev/shm, once rank 0 published its name.
  fs::path segmentPath() const {
    std::ifstream file(files.pathOf(key + "/shm_name"));
    std::string name;
    std::getline(file, name);
    return "/dev/shm" + name;
  }
};

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs body(rank) in `size` forked processes and fails the test unless every one exits
// with 0 (body returned with no gtest failure and no exception) within `limit`.
void runRanks(int size, const std::function<void(int rank)>& body, std::chrono::seconds limit = 60s) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      int code = 0;
      try {
        body(rank);
        code = testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d threw: %s\n", rank, error.what());
        code = 2;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses(size, -1);
  int running = size;
  const auto deadline = Clock::now() + limit;
  while (running > 0 && Clock::now() < deadline) {
    for (int rank = 0; rank < size; ++rank) {
      if (statuses[rank] == -1 && waitpid(pids[rank], &statuses[rank], WNOHANG) == pids[rank]) --running;
    }
    std::this_thread::sleep_for(1ms);
  }
  for (int rank = 0; rank < size; ++rank) {
    if (statuses[rank] == -1) {
      kill(pids[rank], SIGKILL);
      waitpid(pids[rank], nullptr, 0);
      ADD_FAILURE() << "rank " << rank << " still ran after " << limit.count() << " s: killed";
    } else {
      EXPECT_TRUE(WIFEXITED(statuses[rank]) && WEXITSTATUS(statuses[rank]) == 0)
          << "rank " << rank << ": " << describeStatus(statuses[rank]);
    }
  }
}

// The byte rank `from` sends rank `to` at `index` in round `round`: every (round, sender,
// receiver) differs, so data from a wrong slot or a wrong exchange shows.
std::byte pattern(int round, int from, int to, size_t index) {
  return static_cast<std::byte>((round * 131 + from * 37 + to * 11 + index * 7 + index / 251) & 0xff);
}

void fill(void* buffer, size_t bytes, int round, int from, int to) {
  auto* bytes_out = static_cast<std::byte*>(buffer);
  for (size_t i = 0; i < bytes; ++i) bytes_out[i] = pattern(round, from, to, i);
}

// The index of the first byte that differs from the pattern, or `bytes` when none does.
size_t firstMismatch(const void* buffer, size_t bytes, int round, int from, int to) {
  const auto* bytes_in = static_cast<const std::byte*>(buffer);
  for (size_t i = 0; i < bytes; ++i) {
    if (bytes_in[i] != pattern(round, from, to, i)) return i;
  }
  return bytes;
}

// An alltoall's blocks: rank p sends count(p, q) bytes to q, some zero, none alike. The
// transport takes and gives them packed in rank order, so uneven counts make every
// block but the first start at an odd place, and a wrong offset on either side shows in
// the contents. With `largest` past capacity / size a block takes several rounds.
struct AlltoallPlan {
  std::vector<size_t> send_counts, recv_counts, recv_offsets;
  size_t largest = 0;  // over every pair of ranks
  std::vector<std::byte> input, output;

  static size_t count(int round, int from, int to, size_t most) {
    if ((from + to + round) % 3 == 0) return 0;
    return (static_cast<size_t>(from * 7 + to * 13 + round * 29) * 97) % most + 1;
  }

  AlltoallPlan(int round, int rank, int size, size_t most)
      : send_counts(size), recv_counts(size), recv_offsets(size) {
    for (int p = 0; p < size; ++p) {
      for (int q = 0; q < size; ++q) largest = std::max(largest, count(round, p, q, most));
    }
    size_t sent = 0, received = 0;
    for (int q = 0; q < size; ++q) {
      send_counts[q] = count(round, rank, q, most);
      recv_counts[q] = count(round, q, rank, most);
      recv_offsets[q] = received;
      received += recv_counts[q];
      sent += send_counts[q];
    }
    input.resize(sent);
    output.resize(received);
    size_t offset = 0;
    for (int q = 0; q < size; ++q) {
      fill(input.data() + offset, send_counts[q], round, rank, q);
      offset += send_counts[q];
    }
  }

  // Blocks that fit one exchange of a transport of `capacity` bytes.
  static AlltoallPlan oneRound(int round, int rank, int size, size_t capacity) {
    return AlltoallPlan(round, rank, size, capacity / size - 8);
  }

  void run(Transport& transport) {
    transport.alltoall(send_counts.data(), recv_counts.data(), largest, input.data(), output.data());
  }

  // Empty when every block arrived intact, else where the first one differs.
  std::string mismatch(int round, int rank) const {
    for (size_t q = 0; q < recv_counts.size(); ++q) {
      const size_t at = firstMismatch(output.data() + recv_offsets[q], recv_counts[q], round, static_cast<int>(q), rank);
      if (at != recv_counts[q]) {
        return "round " + std::to_string(round) + ": the block from rank " + std::to_string(q) + " differs at byte " +
               std::to_string(at) + " of " + std::to_string(recv_counts[q]);
      }
    }
    return "";
  }
};

class ShmTransportRanks : public testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Sizes, ShmTransportRanks, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

TEST_P(ShmTransportRanks, AllgatherDeliversEveryRanksBytes) {
  const int size = GetParam();
  const Group group;
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size);
    EXPECT_STREQ(transport->name(), "shm");
    EXPECT_EQ(transport->rank(), rank);
    EXPECT_EQ(transport->size(), size);
    EXPECT_EQ(transport->capacity(), 4096u);
    EXPECT_EQ(transport->exchanges(), 0u) << "the setup is not counted";
    int round = 0;
    for (const size_t bytes : {size_t{1}, size_t{0}, size_t{777}}) {
      const uint64_t k = transport->exchanges();
      EXPECT_EQ(k, static_cast<uint64_t>(round));
      fill(transport->sendBuffer(k), bytes, round, rank, 0);
      transport->allgather(bytes);
      EXPECT_EQ(transport->exchanges(), k + 1);
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(firstMismatch(transport->received(k, r), bytes, round, r, 0), bytes) << "from rank " << r;
      }
      ++round;
    }
  });
}

TEST_P(ShmTransportRanks, BroadcastFromEveryRoot) {
  const int size = GetParam();
  const Group group;
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size);
    for (int root = 0; root < size; ++root) {
      const size_t bytes = 100 * root + 1;
      const uint64_t k = transport->exchanges();
      if (rank == root) fill(transport->sendBuffer(k), bytes, root, root, 0);
      transport->broadcast(bytes, root);
      EXPECT_EQ(firstMismatch(transport->received(k, root), bytes, root, root, 0), bytes) << "root " << root;
    }
  });
}

TEST_P(ShmTransportRanks, AlltoallWithUnevenAndZeroCounts) {
  const int size = GetParam();
  const Group group;
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size);
    for (int round = 0; round < 6; ++round) {
      AlltoallPlan plan = AlltoallPlan::oneRound(round, rank, size, transport->capacity());
      const uint64_t k = transport->exchanges();
      plan.run(*transport);
      EXPECT_EQ(transport->exchanges(), k + 1) << "round " << round;
      EXPECT_EQ(plan.mismatch(round, rank), "");
    }
  });
}

// Blocks up to three times what one exchange carries per block go in rounds, each an
// exchange, as many on every rank.
TEST_P(ShmTransportRanks, AlltoallPastTheCapacityGoesInRounds) {
  const int size = GetParam();
  const Group group;
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size);
    const size_t block = transport->capacity() / size;
    for (int round = 0; round < 4; ++round) {
      AlltoallPlan plan(round, rank, size, 3 * block);
      const uint64_t k = transport->exchanges();
      plan.run(*transport);
      EXPECT_EQ(transport->exchanges(), k + (plan.largest + block - 1) / block) << "round " << round;
      EXPECT_EQ(plan.mismatch(round, rank), "");
    }
  });
}

// Each round's exchange kind and size change, and the next round's data is written before
// this round's is checked, while some rank lags now and then: a rank overwriting a slot a
// peer still reads, or received() pointing at the wrong slot set, shows in the contents.
TEST_P(ShmTransportRanks, ManyConsecutiveExchangesKeepTheirContents) {
  const int size = GetParam();
  const Group group;
  static constexpr int kRounds = 400;
  static constexpr size_t kCapacity = 8192;
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size, kCapacity);
    const auto bytesOf = [](int round) { return static_cast<size_t>(round * 613) % kCapacity + 1; };
    // Round r is exchange k0 + r: its data goes to sendBuffer(k0 + r).
    const uint64_t k0 = transport->exchanges();
    const auto fillRound = [&](int round) {
      void* send = transport->sendBuffer(k0 + round);
      switch (round % 4) {
        case 0: fill(send, bytesOf(round), round, rank, 0); break;
        case 1:
          if (rank == round % size) fill(send, bytesOf(round), round, rank, 0);
          break;
        default: break;
      }
    };
    fillRound(0);
    for (int round = 0; round < kRounds; ++round) {
      if (round % 7 == 0 && rank == (round / 7) % size) std::this_thread::sleep_for(200us);
      const uint64_t k = k0 + round;
      ASSERT_EQ(transport->exchanges(), k);
      AlltoallPlan plan = AlltoallPlan::oneRound(round, rank, size, kCapacity);
      switch (round % 4) {
        case 0: transport->allgather(bytesOf(round)); break;
        case 1: transport->broadcast(bytesOf(round), round % size); break;
        case 2: plan.run(*transport); break;
        default: transport->barrier(); break;
      }
      if (round + 1 < kRounds) fillRound(round + 1);
      switch (round % 4) {
        case 0:
          for (int r = 0; r < size; ++r) {
            ASSERT_EQ(firstMismatch(transport->received(k, r), bytesOf(round), round, r, 0), bytesOf(round))
                << "round " << round << " from rank " << r;
          }
          break;
        case 1:
          ASSERT_EQ(firstMismatch(transport->received(k, round % size), bytesOf(round), round, round % size, 0),
                    bytesOf(round))
              << "round " << round;
          break;
        case 2: ASSERT_EQ(plan.mismatch(round, rank), ""); break;
        default: break;
      }
    }
  });
}

// Queue-style use, as the pccl backend makes it: before exchange k the caller takes the
// pointers of sendBuffer(k + 1) and received(k, r) (to queue copies into and out of them),
// and after it writes round k + 1's data through the former before reading round k's
// through the latter. The pointers taken ahead must be the ones the exchange uses, stay
// the same when asked again afterwards, and keep their contents while the next round's
// data goes in; an alltoall now and then (through memory of its own) must not disturb the
// exchanges around it. Some rank lags now and then.
TEST_P(ShmTransportRanks, PointersTakenAheadOfTheExchange) {
  const int size = GetParam();
  const Group group;
  static constexpr int kRounds = 120;
  static constexpr size_t kCapacity = 4096;
  enum Kind { kAllgather, kBroadcast, kBarrier, kAlltoall };
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size, kCapacity);
    const auto kindOf = [](int round) {
      static constexpr Kind kinds[] = {kAllgather, kBroadcast, kAllgather, kBarrier, kBroadcast,
                                       kAllgather, kAlltoall,  kBarrier,   kBroadcast};
      return kinds[(round * 5 + round / 9) % 9];
    };
    const auto bytesOf = [](int round) { return static_cast<size_t>(round * 389 + 17) % kCapacity + 1; };
    const auto rootOf = [size](int round) { return (round * 3 + 1) % size; };
    const auto fillRound = [&](void* send, int round) {
      switch (kindOf(round)) {
        case kAllgather: fill(send, bytesOf(round), round, rank, 0); break;
        case kBroadcast:
          if (rank == rootOf(round)) fill(send, bytesOf(round), round, rank, 0);
          break;
        case kAlltoall:
        case kBarrier: break;
      }
    };
    const uint64_t k0 = transport->exchanges();
    fillRound(transport->sendBuffer(k0), 0);
    std::vector<const void*> received(size);
    for (int round = 0; round < kRounds; ++round) {
      const uint64_t k = k0 + round;
      ASSERT_EQ(transport->exchanges(), k) << "round " << round;
      // Taken before exchange k is called.
      void* const next_send = transport->sendBuffer(k + 1);
      ASSERT_NE(next_send, transport->sendBuffer(k)) << "round " << round << ": both parities share a buffer";
      ASSERT_EQ(next_send, transport->sendBuffer(k + 3)) << "round " << round;
      if (kindOf(round) != kAlltoall) {
        for (int r = 0; r < size; ++r) received[r] = transport->received(k, r);
      }
      if (round % 5 == 0 && rank == (round / 5) % size) std::this_thread::sleep_for(300us);

      AlltoallPlan plan = AlltoallPlan::oneRound(round, rank, size, kCapacity);
      switch (kindOf(round)) {
        case kAllgather: transport->allgather(bytesOf(round)); break;
        case kBroadcast: transport->broadcast(bytesOf(round), rootOf(round)); break;
        case kAlltoall: plan.run(*transport); break;
        case kBarrier: transport->barrier(); break;
      }
      ASSERT_EQ(transport->exchanges(), k + 1) << "round " << round;
      ASSERT_EQ(transport->sendBuffer(k + 1), next_send) << "round " << round;
      if (kindOf(round) != kAlltoall) {
        for (int r = 0; r < size; ++r) {
          ASSERT_EQ(transport->received(k, r), received[r]) << "round " << round << " rank " << r;
        }
      }

      // The next round's data first, through the pointer taken ahead; then this round's check.
      if (round + 1 < kRounds) fillRound(next_send, round + 1);
      switch (kindOf(round)) {
        case kAllgather:
          for (int r = 0; r < size; ++r) {
            ASSERT_EQ(firstMismatch(received[r], bytesOf(round), round, r, 0), bytesOf(round))
                << "round " << round << " (allgather) from rank " << r;
          }
          break;
        case kBroadcast:
          ASSERT_EQ(firstMismatch(received[rootOf(round)], bytesOf(round), round, rootOf(round), 0), bytesOf(round))
              << "round " << round << " (broadcast) from root " << rootOf(round);
          break;
        case kAlltoall: ASSERT_EQ(plan.mismatch(round, rank), ""); break;
        case kBarrier: break;
      }
    }
  });
}

// A capacity that is no multiple of a cache line, used whole.
TEST_P(ShmTransportRanks, CapacitySizedExchanges) {
  const int size = GetParam();
  const Group group;
  static constexpr size_t kCapacity = (1 << 20) + 3;
  runRanks(size, [&](int rank) {
    auto transport = group.join(rank, size, kCapacity);
    uint64_t k = transport->exchanges();
    fill(transport->sendBuffer(k), kCapacity, 1, rank, 0);
    transport->allgather(kCapacity);
    for (int r = 0; r < size; ++r) EXPECT_EQ(firstMismatch(transport->received(k, r), kCapacity, 1, r, 0), kCapacity);

    k = transport->exchanges();
    if (rank == size - 1) fill(transport->sendBuffer(k), kCapacity, 2, rank, 0);
    transport->broadcast(kCapacity, size - 1);
    EXPECT_EQ(firstMismatch(transport->received(k, size - 1), kCapacity, 2, size - 1, 0), kCapacity);

    // Everything to the next rank, nothing to the others: a block of the whole
    // capacity, in rounds of capacity / size.
    const int next = (rank + 1) % size;
    const int previous = (rank + size - 1) % size;
    std::vector<size_t> send_counts(size, 0), recv_counts(size, 0);
    send_counts[next] = kCapacity;
    recv_counts[previous] += kCapacity;
    std::vector<std::byte> input(kCapacity), output(kCapacity);
    fill(input.data(), kCapacity, 3, rank, next);
    transport->alltoall(send_counts.data(), recv_counts.data(), kCapacity, input.data(), output.data());
    EXPECT_EQ(firstMismatch(output.data(), kCapacity, 3, previous, rank), kCapacity);
  });
}

TEST(ShmTransport, SegmentIsUnlinkedOnceEveryRankMappedIt) {
  const Group group;
  runRanks(3, [&](int rank) {
    auto transport = group.join(rank, 3);
    const fs::path segment = group.segmentPath();
    EXPECT_NE(segment, "/dev/shm") << "rank 0 published no name";
    EXPECT_FALSE(fs::exists(segment)) << segment;
    const uint64_t k = transport->exchanges();
    fill(transport->sendBuffer(k), 64, 0, rank, 0);
    transport->allgather(64);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(firstMismatch(transport->received(k, r), 64, 0, r, 0), 64u);
  });
}

TEST(ShmTransport, AGroupOfOneExchangesWithItself) {
  const Group group;
  auto transport = group.join(0, 1);
  const uint64_t k = transport->exchanges();
  fill(transport->sendBuffer(k), 10, 0, 0, 0);
  transport->allgather(10);
  EXPECT_EQ(firstMismatch(transport->received(k, 0), 10, 0, 0, 0), 10u);
  fill(transport->sendBuffer(k + 1), 10, 1, 0, 0);
  transport->broadcast(10, 0);
  EXPECT_EQ(firstMismatch(transport->received(k + 1, 0), 10, 1, 0, 0), 10u);
  transport->barrier();
  EXPECT_EQ(transport->exchanges(), k + 3);
  EXPECT_THROW(transport->received(k + 2, 1), std::out_of_range);
  EXPECT_THROW(transport->received(k + 2, -1), std::out_of_range);
}

// Every call of an aborted transport throws at once.
void expectEveryCallThrows(Transport& transport, const std::string& why) {
  const int size = transport.size();
  const std::vector<size_t> zeros(size, 0);
  const auto start = Clock::now();
  const std::vector<std::function<void()>> calls = {
      [&] { transport.allgather(8); },
      [&] { transport.broadcast(8, 0); },
      [&] { transport.alltoall(zeros.data(), zeros.data(), 0, nullptr, nullptr); },
      [&] { transport.barrier(); },
  };
  for (const auto& call : calls) {
    try {
      call();
      ADD_FAILURE() << "a call of an aborted transport returned";
    } catch (const TransportError& error) {
      EXPECT_NE(std::string(error.what()).find(why), std::string::npos) << error.what();
    }
  }
  EXPECT_LT(Clock::now() - start, 100ms);
}

// Runs `call`, expecting a TransportError that says each of `parts`; returns how long it took.
Clock::duration expectTransportError(const std::function<void()>& call, const std::vector<std::string>& parts) {
  const auto start = Clock::now();
  try {
    call();
    ADD_FAILURE() << "no TransportError";
  } catch (const TransportError& error) {
    for (const auto& part : parts) EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
  }
  return Clock::now() - start;
}

TEST(ShmTransport, ARankThatExitedIsNamedLongBeforeTheTimeout) {
  const Group group;
  runRanks(3, [&](int rank) {
    auto transport = group.join(rank, 3, 4096, 30s);
    if (rank == 2) {
      std::fflush(stdout);
      _exit(0);
    }
    const auto took = expectTransportError([&] { transport->allgather(8); },
                                           {"exchange 0 (allgather) of group '" + group.key + "'", "rank 2 (pid "});
    EXPECT_LT(took, 2s);
    expectEveryCallThrows(*transport, "rank 2 (pid ");
  });
}

// A rank whose parent has not reaped it yet still answers kill(pid, 0).
TEST(ShmTransport, AnUnreapedRankIsSeenToHaveExited) {
  const Group group;
  runRanks(2, [&](int rank) {
    pid_t zombie = 0;
    if (rank == 0) {
      zombie = fork();
      if (zombie == 0) {
        auto transport = group.join(2, 3, 4096, 30s);
        std::fflush(stdout);
        _exit(0);
      }
    }
    auto transport = group.join(rank, 3, 4096, 30s);
    const auto took = expectTransportError([&] { transport->barrier(); }, {"barrier", "exited"});
    EXPECT_LT(took, 2s);
    if (zombie != 0) waitpid(zombie, nullptr, 0);
  });
}

TEST(ShmTransport, ARankThatNeverArrivesTimesOut) {
  const Group group;
  runRanks(2, [&](int rank) {
    auto transport = group.join(rank, 2, 4096, 300ms);
    if (rank == 1) {
      std::this_thread::sleep_for(1s);
      expectEveryCallThrows(*transport, "rank 0 aborted the group");
      return;
    }
    const auto took = expectTransportError([&] { transport->allgather(8); },
                                           {"exchange 0 (allgather)", "ranks [1] did not arrive within 0.3 s"});
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 2s);
    expectEveryCallThrows(*transport, "ranks [1] did not arrive");
  });
}

TEST(ShmTransport, ExceedingTheCapacityAbortsTheGroup) {
  const Group group;
  runRanks(2, [&](int rank) {
    auto transport = group.join(rank, 2, 4096, 30s);
    if (rank == 0) {
      expectTransportError([&] { transport->allgather(4097); }, {"4097 bytes exceed the capacity of 4096"});
    } else {
      const auto took = expectTransportError([&] { transport->allgather(8); }, {"rank 0 aborted the group"});
      EXPECT_LT(took, 2s);
    }
  });
}

TEST(ShmTransport, MismatchedAlltoallCountsAbortTheGroup) {
  const Group group;
  runRanks(2, [&](int rank) {
    auto transport = group.join(rank, 2, 4096, 30s);
    const std::vector<size_t> send_counts = {8, 8};
    const std::vector<size_t> recv_counts = {rank == 1 ? size_t{9} : size_t{8}, 8};
    std::vector<std::byte> input(16), output(17);
    const auto alltoall = [&] {
      transport->alltoall(send_counts.data(), recv_counts.data(), 9, input.data(), output.data());
    };
    if (rank == 1) {
      expectTransportError(alltoall, {"rank 0 sends 8 bytes to rank 1, which expects 9"});
    } else {
      alltoall();
      expectTransportError([&] { transport->barrier(); }, {"rank 1 aborted the group"});
    }
  });
}

TEST(ShmTransport, ASetupARankNeverJoinsFailsAndLeavesNoSegment) {
  const Group group;
  runRanks(3, [&](int rank) {
    if (rank == 2) {
      std::this_thread::sleep_for(1500ms);
      expectTransportError([&] { group.join(rank, 3, 4096, 300ms); }, {"setup of group"});
      return;
    }
    expectTransportError([&] { group.join(rank, 3, 4096, 300ms); }, {"setup of group"});
    EXPECT_FALSE(fs::exists(group.segmentPath())) << group.segmentPath();
  });
}

TEST(ShmTransport, ARendezvousTimeoutIsReportedWithItsContext) {
  const Group group;
  expectTransportError([&] { group.join(1, 2, 4096, 100ms); },
                       {"setup of group '" + group.key + "' (rank 1 of 2)", "waiting for rank 0",
                        "file rendezvous: " + group.key + "/shm_name was not set in time"});
}

TEST(ShmTransport, ASegmentTooLargeForDevShmFailsClearly) {
  const Group group;
  expectTransportError([&] { group.join(0, 1, size_t{1} << 42); }, {"cannot reserve", "posix_fallocate"});
  for (const auto& entry : fs::directory_iterator("/dev/shm")) {
    EXPECT_EQ(entry.path().filename().string().rfind("pccl-" + std::to_string(getpid()) + "-", 0),
              std::string::npos)
        << entry.path();
  }
}

// Rank 0's failure reaches the other ranks at once (not at their timeout), so every
// rank can fall back to another transport together.
TEST(ShmTransport, ASegmentRankZeroCannotCreateFailsEveryRankAtOnce) {
  const Group group;
  runRanks(2, [&](int rank) {
    const auto start = std::chrono::steady_clock::now();
    expectTransportError([&] { group.join(rank, 2, size_t{1} << 42, 30s); },
                         {rank == 0 ? "posix_fallocate" : "rank 0 could not create the segment"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
}

// Printed, not asserted: a few µs to tens of µs, far below a TCP round trip.
TEST(ShmTransport, AllgatherOf8BytesLatency) {
  for (const int size : {2, 4}) {
    const Group group;
    runRanks(size, [&](int rank) {
      auto transport = group.join(rank, size);
      constexpr int kWarmUp = 200;
      constexpr int kExchanges = 5000;
      const uint64_t k0 = transport->exchanges();
      Clock::time_point start;
      for (int i = 0; i < kWarmUp + kExchanges; ++i) {
        if (i == kWarmUp) start = Clock::now();
        std::memcpy(transport->sendBuffer(k0 + i), &i, sizeof i);
        transport->allgather(8);
      }
      const double micros = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kExchanges;
      if (rank == 0) std::printf("8-byte allgather, %d ranks: %.1f us per exchange\n", size, micros);
    });
  }
}

}  // namespace
}  // namespace pto::distributed
