// File: tools/child_runner.cc
//
// See child_runner.h. Exec failures travel back to the parent through a close-on-exec pipe: the
// parent reads either end-of-file (exec succeeded) or the child's errno, so a command that does not
// exist is one clear line instead of a report that never appears. Between fork and exec the child
// only calls async-signal-safe functions and allocates nothing.
#include "tools/child_runner.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fmt/format.h"

extern char** environ;

namespace poolscope::tools {
namespace {

constexpr char kRootPidPrefix[] = "POOLSCOPE_ROOT_PID=";

bool StartsWith(const char* text, const char* prefix) {
  return std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Writes "PREFIX<pid>" into `buffer` without allocating (async-signal-safe).
void WriteRootPid(char* buffer, pid_t pid) {
  size_t at = sizeof(kRootPidPrefix) - 1;
  std::memcpy(buffer, kRootPidPrefix, at);
  char digits[24];
  int n = 0;
  unsigned long value = static_cast<unsigned long>(pid);
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n > 0) buffer[at++] = digits[--n];
  buffer[at] = '\0';
}

}  // namespace

std::vector<std::string> ChildEnvironment(char** current, const std::string& preload,
                                          const std::string& options) {
  std::vector<std::string> env;
  std::string existing_preload;
  for (char** entry = current; entry != nullptr && *entry != nullptr; ++entry) {
    if (StartsWith(*entry, "LD_PRELOAD=")) {
      existing_preload = *entry + std::strlen("LD_PRELOAD=");
    } else if (StartsWith(*entry, "POOLSCOPE_OPTIONS=") || StartsWith(*entry, kRootPidPrefix)) {
      continue;
    } else {
      env.emplace_back(*entry);
    }
  }
  env.push_back("LD_PRELOAD=" + preload +
                (existing_preload.empty() ? "" : ":" + existing_preload));
  env.push_back("POOLSCOPE_OPTIONS=" + options);
  return env;
}

ChildResult RunChild(const ChildSpec& spec) {
  ChildResult result;
  if (spec.argv.empty()) {
    result.problem = "no command";
    return result;
  }
  std::vector<std::string> env = ChildEnvironment(environ, spec.preload, spec.options);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  char root_pid[sizeof(kRootPidPrefix) + 24];
  WriteRootPid(root_pid, 0);
  envp.push_back(root_pid);
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = spec.argv;
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    result.problem = fmt::format("pipe: {}", std::strerror(errno));
    return result;
  }
  // Like system(3): ^C and ^\ go to the program, and poolscope lives on to report.
  struct sigaction ignore = {}, old_int = {}, old_quit = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  std::fflush(nullptr);

  double start = Now();
  pid_t pid = fork();
  if (pid < 0) {
    result.problem = fmt::format("fork: {}", std::strerror(errno));
    close(error_pipe[0]);
    close(error_pipe[1]);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    return result;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    close(error_pipe[0]);
    WriteRootPid(root_pid, getpid());
    environ = envp.data();
    execvp(argv[0], argv.data());
    int error = errno;
    ssize_t ignored = write(error_pipe[1], &error, sizeof(error));
    (void)ignored;
    _exit(error == ENOENT ? 127 : 126);
  }
  close(error_pipe[1]);
  int exec_error = 0;
  ssize_t got;
  do {
    got = read(error_pipe[0], &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  close(error_pipe[0]);
  result.pid = pid;
  result.started = got != static_cast<ssize_t>(sizeof(exec_error));
  if (!result.started) {
    result.exec_errno = exec_error;
    result.problem = std::strerror(exec_error);
  }

  const bool tty = !spec.progress_label.empty() && isatty(STDERR_FILENO);
  if (result.started && !spec.progress_label.empty() && !tty) {
    std::fprintf(stderr, "poolscope: %s: running\n", spec.progress_label.c_str());
  }
  int status = 0;
  struct rusage usage = {};
  double last_shown = -1;
  for (;;) {
    pid_t done = wait4(pid, &status, tty ? WNOHANG : 0, &usage);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      result.problem = fmt::format("wait4: {}", std::strerror(errno));
      result.started = false;
      break;
    }
    if (tty && result.started) {
      double elapsed = Now() - start;
      if (elapsed - last_shown >= 0.1) {
        std::fprintf(stderr, "\rpoolscope: %s: %.1f s", spec.progress_label.c_str(), elapsed);
        std::fflush(stderr);
        last_shown = elapsed;
      }
      struct timespec pause = {0, 20 * 1000 * 1000};
      nanosleep(&pause, nullptr);
    }
  }
  result.wall_seconds = Now() - start;
  result.peak_rss_kib = usage.ru_maxrss;
  if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_status = 128 + result.signal;
  }
  if (result.started && !spec.progress_label.empty()) {
    std::string how = result.signal != 0 ? fmt::format("killed by signal {}", result.signal)
                                         : fmt::format("exit {}", result.exit_status);
    std::fprintf(stderr, "%spoolscope: %s: %.3f s, %s\n", tty ? "\r\033[K" : "",
                 spec.progress_label.c_str(), result.wall_seconds, how.c_str());
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  return result;
}

}  // namespace poolscope::tools
