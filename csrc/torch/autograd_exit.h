// Process exit and torch's autograd threads for pto.
#pragma once

namespace pto::torch_glue {

// Waits, without the GIL, until torch's autograd thread of every pto device that has
// held memory has finished what it was given. Called at interpreter exit (atexit,
// before finalisation): that thread may still hold the last reference to a backward's
// task, whose saved Python state (the contextvars context torch stashes on every
// backward) it must release under the GIL; once Python is finalising, taking the GIL
// ends the thread by a forced unwind through a noexcept destructor, and the process
// aborts ("terminate called without an active exception"). CUDA's device threads run
// the same race; pto's threads finish first. The caller must not hold the GIL: the
// threads may need it (and torch's engine refuses to run under it).
void settleAutogradDeviceThreads();

}  // namespace pto::torch_glue
