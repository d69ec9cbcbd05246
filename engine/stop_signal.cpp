#include "engine/stop_signal.hpp"

#include <cerrno>
#include <cstring>
#include <string>

#include "engine/errors.hpp"

namespace fabricsim::engine {
namespace {

volatile std::sig_atomic_t g_stop = 0;

void on_stop_signal(int sig) { g_stop = sig; }

}  // namespace

volatile std::sig_atomic_t* stop_signal_flag() { return &g_stop; }

const volatile std::sig_atomic_t* install_stop_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      throw InternalError("sigaction(" + std::to_string(sig) + ") failed: " + std::strerror(errno));
    }
  }
  return &g_stop;
}

}  // namespace fabricsim::engine
