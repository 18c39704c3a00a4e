// Graph capture as the other entry points meet it (ptoStreamBeginCapture …
// ptoStreamEndCapture live in capture.cpp): whether a stream captures, the
// refusals a running capture imposes, and issueOrRecord, the one way every call
// that queues work on a stream either records it or hands it to the driver.
// Internal to csrc/runtime.
#pragma once

#include <utility>

#include "driver.h"

namespace pto::rt {

// Whether `stream` records into a capture. Where nothing captures, one atomic load.
bool isCapturing(ptoStream stream);

// Records `node` into the capture of `stream` (*recorded true), refused when that
// capture was invalidated; *recorded false when the stream captures no longer.
ptoError recordNode(ptoStream stream, const char* call, GraphNode node, bool* recorded);

// Work `call` gives to `stream`: while the stream captures, `describe(node)` fills
// in the node (and may refuse the work), which is recorded into the capture;
// otherwise `issue()` hands the work to the driver.
template <class Describe, class Issue>
ptoError issueOrRecord(ptoStream stream, const char* call, Describe describe, Issue issue) {
  if (!isCapturing(stream)) return issue();
  GraphNode node;
  if (ptoError status = describe(node); status != PTO_SUCCESS) return status;
  bool recorded = false;
  if (ptoError status = recordNode(stream, call, std::move(node), &recorded); status != PTO_SUCCESS) return status;
  return recorded ? PTO_SUCCESS : issue();
}

// A call that waits for the device (synchronize, query) is refused while a
// capture it concerns runs: one on `stream` or on `device` (either may be
// absent: null, -1), or any capture the mode keeps from this thread.
ptoError refuseWhileCapturing(const char* call, ptoStream stream, int32_t device);

// An event a capture recorded completes only in replays: waiting for it on the
// host, or on a stream outside the capture, is refused.
ptoError refuseCapturedEvent(const char* call, ptoEvent event);

// A captured copy reads and writes its host memory again at every replay, long
// after the caller let it go: only pinned memory (which lives until freed) may be.
// `side` says which end `host` is ("into", "from"); `stream` captures.
ptoError refusePageableCopy(Driver* driver, ptoStream stream, const void* host, const char* side, ptoMemcpyKind kind);

// ptoEventRecord on `stream`: true when the stream captures and the event is
// recorded into its capture, for the driver to record nothing. Every other
// capture forgets the event, which orders real work from now on.
bool recordEventIntoCapture(ptoEvent event, ptoStream stream);

// ptoStreamWaitEvent: *handled when the capture decides it, the driver then waits
// for nothing: a capturing stream waiting for an event its capture recorded (the
// recorded order already waits), or a stream joining the capture that recorded
// the event (as CUDA's fork). A capturing stream waiting for any other event is
// refused.
ptoError waitEventInCapture(ptoStream stream, ptoEvent event, bool* handled);

}  // namespace pto::rt
