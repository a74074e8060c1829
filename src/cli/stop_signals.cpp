#include "cli/stop_signals.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nemotron::cli {

namespace {

volatile std::sig_atomic_t g_signal = 0;
// The first signal's messages, composed before the handlers are installed (the handler only writes).
char g_term_message[256], g_int_message[256];
struct sigaction g_old_term, g_old_int;

void write_stderr(const char* s) {
  const ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

// Async-signal-safe: a flag, write(2), and for a second signal the default action.
extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {
    write_stderr(sig == SIGTERM ? "received SIGTERM again: exiting at once\n"
                                : "received SIGINT again: exiting at once\n");
    std::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_signal = sig;
  write_stderr(sig == SIGTERM ? g_term_message : g_int_message);
}

}  // namespace

StopSignals::StopSignals(const char* action) {
  g_signal = 0;
  std::snprintf(g_term_message, sizeof(g_term_message), "received SIGTERM: %s (a second one exits at once)\n", action);
  std::snprintf(g_int_message, sizeof(g_int_message), "received SIGINT: %s (a second one exits at once)\n", action);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes of a save in progress go on undisturbed
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGINT, &sa, &g_old_int);
  // A signal the parent ignores stays ignored (nohup; a shell's background job ignores SIGINT).
  if (g_old_term.sa_handler == SIG_IGN) sigaction(SIGTERM, &g_old_term, nullptr);
  if (g_old_int.sa_handler == SIG_IGN) sigaction(SIGINT, &g_old_int, nullptr);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
}

std::string StopSignals::requested() {
  const int sig = g_signal;
  if (sig == 0) return "";
  return sig == SIGTERM ? "received SIGTERM" : sig == SIGINT ? "received SIGINT" : "received a signal";
}

int StopSignals::signal_number() { return g_signal; }

void reraise(int sig) {
  std::fflush(nullptr);
  std::signal(sig, SIG_DFL);
  ::raise(sig);
  std::_Exit(128 + sig);  // not reached: the default action of SIGTERM and SIGINT ends the process
}

}  // namespace nemotron::cli
