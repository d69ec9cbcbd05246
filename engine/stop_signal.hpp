#pragma once
/// @file stop_signal.hpp
/// SIGTERM and SIGUSR1 as stop requests (docs/checkpoint.md): the handler only sets a flag
/// (async-signal-safe); the engine reads it once per window (RunControl::stop_flag) and stops at
/// the next window boundary, on every MPI process at the same one.
#include <csignal>

namespace fabricsim::engine {

/// Installs the handler for SIGTERM and SIGUSR1 (SA_RESTART, so interrupted system calls
/// resume) and returns the flag it sets (the signal's number; 0 until one came). The flag is
/// the process's only global mutable state: a signal handler can reach nothing else.
/// @throws InternalError if sigaction fails.
const volatile std::sig_atomic_t* install_stop_signals();

/// The flag of install_stop_signals() without installing anything (tests).
volatile std::sig_atomic_t* stop_signal_flag();

}  // namespace fabricsim::engine
