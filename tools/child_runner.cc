// File: tools/child_runner.cc
//
// See child_runner.h. Exec failures travel back to the parent through a close-on-exec pipe: the
// parent reads either end-of-file (exec succeeded) or the child's errno, so a command that does not
// exist is one clear line instead of a report that never appears. Between fork and exec the child
// only calls async-signal-safe functions and allocates nothing.
#include "tools/child_runner.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <elf.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fmt/format.h"
#include "report/report_path.h"

extern char** environ;

namespace poolscope::tools {
namespace {

constexpr char kRootPidPrefix[] = "POOLSCOPE_ROOT_PID=";
constexpr char kRunPrefix[] = "POOLSCOPE_RUN=";
constexpr char kRunDirPrefix[] = "POOLSCOPE_RUN_DIR=";

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

// The run's variables (ChildSpec::run) for the child `pid`, written into `run` and `run_dir` (each
// with room for its prefix and PATH_MAX more) without allocating (async-signal-safe); `run_dir` is
// left empty without a folder.
void WriteRun(char* run, char* run_dir, size_t cap, const ChildSpec& spec, uint64_t start_ns, pid_t pid) {
  char pid_text[24], ns_text[24];
  report::FormatDecimal(static_cast<uint64_t>(pid), pid_text);
  report::FormatDecimal(start_ns, ns_text);
  size_t n = 0;
  for (const char* part : {static_cast<const char*>(kRunPrefix), static_cast<const char*>(pid_text), "-",
                           static_cast<const char*>(ns_text)}) {
    for (; *part != '\0' && n + 1 < cap; ++part) run[n++] = *part;
  }
  run[n] = '\0';
  run_dir[0] = '\0';
  if (spec.run_folder.empty()) return;
  const size_t at = sizeof(kRunDirPrefix) - 1;
  std::memcpy(run_dir, kRunDirPrefix, at);
  report::ReportPathValues values;
  values.pid = static_cast<int>(pid);
  values.exe = spec.run_exe.c_str();
  values.start = spec.run_start.c_str();
  report::ExpandReportPath(spec.run_folder.c_str(), values, run_dir + at, cap - at);
}

}  // namespace

std::vector<std::string> ChildEnvironment(char** current, const std::string& preload,
                                          const std::string& options) {
  std::vector<std::string> env;
  std::string existing_preload;
  for (char** entry = current; entry != nullptr && *entry != nullptr; ++entry) {
    if (StartsWith(*entry, "LD_PRELOAD=")) {
      existing_preload = *entry + std::strlen("LD_PRELOAD=");
    } else if (StartsWith(*entry, "POOLSCOPE_OPTIONS=") || StartsWith(*entry, kRootPidPrefix) ||
               StartsWith(*entry, kRunPrefix) || StartsWith(*entry, kRunDirPrefix)) {
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
  // The run's variables, filled in with the child's pid (and a folder that may name it) after fork.
  constexpr size_t kRunCap = sizeof(kRunDirPrefix) + PATH_MAX;
  std::vector<char> run(kRunCap), run_dir(kRunCap);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t start_ns = static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
  if (spec.run) {
    envp.push_back(run.data());
    if (!spec.run_folder.empty()) envp.push_back(run_dir.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = spec.argv;
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int stdout_fd = -1;
  if (!spec.stdout_path.empty()) {
    stdout_fd = open(spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (stdout_fd < 0) {
      result.problem = fmt::format("{}: {}", spec.stdout_path, std::strerror(errno));
      return result;
    }
  }
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    result.problem = fmt::format("pipe: {}", std::strerror(errno));
    if (stdout_fd >= 0) close(stdout_fd);
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
    if (stdout_fd >= 0) close(stdout_fd);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    return result;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    close(error_pipe[0]);
    if (stdout_fd >= 0 && dup2(stdout_fd, STDOUT_FILENO) < 0) {
      int error = errno;
      ssize_t ignored = write(error_pipe[1], &error, sizeof(error));
      (void)ignored;
      _exit(126);
    }
    WriteRootPid(root_pid, getpid());
    if (spec.run) WriteRun(run.data(), run_dir.data(), kRunCap, spec, start_ns, getpid());
    environ = envp.data();
    execvp(argv[0], argv.data());
    int error = errno;
    ssize_t ignored = write(error_pipe[1], &error, sizeof(error));
    (void)ignored;
    _exit(error == ENOENT ? 127 : 126);
  }
  close(error_pipe[1]);
  if (stdout_fd >= 0) close(stdout_fd);
  int exec_error = 0;
  ssize_t got;
  do {
    got = read(error_pipe[0], &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  close(error_pipe[0]);
  result.pid = pid;
  if (spec.run) {
    WriteRun(run.data(), run_dir.data(), kRunCap, spec, start_ns, pid);
    result.run = run.data() + sizeof(kRunPrefix) - 1;
    if (!spec.run_folder.empty()) result.run_dir = run_dir.data() + sizeof(kRunDirPrefix) - 1;
  }
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

namespace {

// `program` as execvp would find it: itself when it holds a '/', else the first executable regular
// file of that name in PATH (execvp's default path when PATH is unset).
std::string FindInPath(const std::string& program) {
  if (program.empty() || program.find('/') != std::string::npos) return program;
  const char* env = getenv("PATH");
  std::string path = env != nullptr ? env : "/bin:/usr/bin";
  size_t start = 0;
  for (;;) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (end == std::string::npos) return "";
    start = end + 1;
  }
}

std::string ObstacleOf(const std::string& file, int depth) {
  struct stat st;
  if (file.empty() || stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  // Secure-execution mode (ld.so(8)): LD_PRELOAD is then limited to standard directories and
  // set-user-ID libraries, which libpoolscope.so is not.
  // (Not on a file system mounted nosuid, where the bits do nothing.)
  struct statvfs fs;
  const bool nosuid = statvfs(file.c_str(), &fs) == 0 && (fs.f_flag & ST_NOSUID) != 0;
  if (!nosuid && (st.st_mode & S_ISUID) != 0 && st.st_uid != geteuid()) return "it is set-user-ID";
  if (!nosuid && (st.st_mode & S_ISGID) != 0 && st.st_gid != getegid()) return "it is set-group-ID";
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  unsigned char head[256];
  ssize_t got = pread(fd, head, sizeof head, 0);
  std::string answer;
  if (got >= 2 && head[0] == '#' && head[1] == '!' && depth == 0) {
    // A script: the kernel runs its interpreter, and that is what the preload must reach.
    std::string line(reinterpret_cast<const char*>(head) + 2, static_cast<size_t>(got) - 2);
    line = line.substr(0, line.find('\n'));
    size_t b = line.find_first_not_of(" \t");
    if (b != std::string::npos) {
      std::string interpreter = line.substr(b, line.find_first_of(" \t", b) - b);
      std::string why = ObstacleOf(interpreter, depth + 1);
      if (!why.empty()) answer = "its interpreter " + interpreter + (why.rfind("it is ", 0) == 0 ? " is " + why.substr(6) : ": " + why);
    }
  } else if (got >= static_cast<ssize_t>(sizeof(Elf64_Ehdr)) && memcmp(head, ELFMAG, SELFMAG) == 0 &&
             head[EI_CLASS] == ELFCLASS64) {
    Elf64_Ehdr eh;
    memcpy(&eh, head, sizeof eh);
    bool interp = false, readable = eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0;
    for (int i = 0; readable && i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) != sizeof ph) {
        readable = false;
        break;
      }
      if (ph.p_type == PT_INTERP) interp = true;
    }
    // A program without an interpreter: a static executable, or a static PIE (ET_DYN with an entry
    // point; a shared library has an interpreter only when it is also a program, and is not run
    // this way).
    if (readable && !interp && (eh.e_type == ET_EXEC || (eh.e_type == ET_DYN && eh.e_entry != 0))) {
      answer = "it is statically linked";
    }
  }
  close(fd);
  return answer;
}

}  // namespace

std::string PreloadObstacle(const std::string& program) { return ObstacleOf(FindInPath(program), 0); }

std::string ProgramName(const std::string& program) {
  std::string path = FindInPath(program);
  char resolved[PATH_MAX];
  if (!path.empty() && realpath(path.c_str(), resolved) != nullptr) path = resolved;
  if (path.empty()) path = program;
  return path.substr(path.rfind('/') + 1);
}

}  // namespace poolscope::tools
