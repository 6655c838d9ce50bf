// File: tools/attach.cc
//
// `poolscope attach`: see attach.h and docs/cli.md.
#include "tools/attach.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/find_report.h"
#include "report/format_util.h"
#include "report/report_model.h"
#include "tools/cli_common.h"
#include "tools/locate.h"

namespace poolscope::tools {

using report::Count;
using report::LoadReport;
using report::OneLine;
using report::Percent;
using report::Report;
using report::Thousands;


const char kAttachUsage[] = R"(usage: poolscope attach [--pool=on|off] [--options=K=V:...] [-o REPORT] [--lib=PATH] PID

Loads libpoolscope.so into the running process PID (through gdb, which stops the process while it
calls dlopen) and routes the malloc family and every operator new and delete form of every object
loaded in it to poolscope from then on: those of objects it loads later too. The process goes on with
pooling on (--pool=on, the default) or off; poolscope counts (and pools) what it allocates from then
on and writes the report when the process ends. This command waits for that, then prints where the
report is and a summary. ^C (SIGINT, or SIGTERM) detaches instead: the report is written then, and the
process goes on (with pooling on, the entries stay in place for the pooled blocks still live, and pass
everything else to the process's allocator).

Blocks made before the attach are in no ledger: their free, realloc and malloc_usable_size go to the
allocator that made them, and the report counts them (attach.preexisting_frees and the like).

  --pool=on|off      pooling in the process (default on)
  --options=K=V:...  POOLSCOPE_OPTIONS keys for poolscope in the process (not pool=; report= is -o)
  -o, --output=PATH  the report (default: report.json in a new temporary directory)
  --lib=PATH         the libpoolscope.so to load (default: next to this program; POOLSCOPE_LIB)

gdb is found as $POOLSCOPE_GDB, else on PATH. Attaching needs the right to trace the process (the same
user, and kernel.yama.ptrace_scope 0, or root / CAP_SYS_PTRACE).

exit status: 0 a report was written; 1 the process ended without one (killed by a signal poolscope
does not catch); 2 bad usage, or a process that cannot be attached (one line says why: no such process,
another user's, ptrace refused, statically linked, poolscope already in it, gdb missing), which is then
left untouched.
)";

namespace {

std::string ReadSmallFile(const std::string& path, bool* ok = nullptr) {
  std::ifstream in(path);
  if (ok != nullptr) *ok = static_cast<bool>(in);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A C string literal for gdb's expression parser.
std::string GdbString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string StatusField(const std::string& status, const std::string& key) {
  size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  size_t end = status.find('\n', at);
  std::string v = status.substr(at, end == std::string::npos ? std::string::npos : end - at);
  size_t first = v.find_first_not_of(" \t");
  return first == std::string::npos ? "" : v.substr(first);
}

// Why PID cannot be attached, or "" when nothing is known against it. *uid: the process's owner.
std::string Refusal(pid_t pid, uid_t* uid, gid_t* gid) {
  if (pid == getpid()) return "is this poolscope command itself";
  if (kill(pid, 0) != 0) {
    if (errno == ESRCH) return "no such process";
    if (errno == EPERM) {
      return "belongs to another user: attaching needs the right to trace it (root or CAP_SYS_PTRACE)";
    }
    return std::string("cannot be signalled: ") + std::strerror(errno);
  }
  const std::string dir = fmt::format("/proc/{}", pid);
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    *uid = st.st_uid;
    *gid = st.st_gid;
  }
  bool ok = false;
  const std::string status = ReadSmallFile(dir + "/status", &ok);
  if (ok) {
    if (StatusField(status, "State").rfind("Z", 0) == 0) return "has exited (a zombie not yet reaped)";
    const std::string tracer = StatusField(status, "TracerPid");
    if (!tracer.empty() && tracer != "0") {
      return fmt::format("is already traced by process {} (a debugger, heaptrack, or another attach)", tracer);
    }
  }
  const std::string maps = ReadSmallFile(dir + "/maps", &ok);
  if (!ok || maps.empty()) {
    if (geteuid() != 0 && *uid != geteuid()) {
      return "belongs to another user: attaching needs the right to trace it (root or CAP_SYS_PTRACE)";
    }
    return "its memory map (/proc/PID/maps) cannot be read";
  }
  if (maps.find("libpoolscope") != std::string::npos) {
    return "already has poolscope loaded (preloaded, or attached before)";
  }
  if (maps.find("/libc.so.6") == std::string::npos && maps.find("/libc-") == std::string::npos) {
    return "is statically linked (no libc.so.6 in its memory map): there is no dynamic loader to load "
           "poolscope with";
  }
  const std::string scope = ReadSmallFile("/proc/sys/kernel/yama/ptrace_scope", &ok);
  if (ok && !scope.empty() && scope[0] == '3') {
    return "ptrace is disabled on this system (kernel.yama.ptrace_scope = 3)";
  }
  return "";
}

std::string FindGdb() {
  if (const char* env = getenv("POOLSCOPE_GDB"); env != nullptr && *env != '\0') {
    if (access(env, X_OK) != 0) {
      throw CliError{"gdb", fmt::format("not found at {} (POOLSCOPE_GDB): attach loads poolscope into the "
                                           "process through gdb",
                                           env)};
    }
    return env;
  }
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    std::string candidate = dir + "/gdb";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw CliError{"gdb", "not found on PATH: attach loads poolscope into the process through gdb "
                           "(install gdb, or set POOLSCOPE_GDB)"};
}

// Lines that leave the process's main thread outside the allocator and outside poolscope before
// anything is called in it: a thread stopped inside malloc may hold the arena's lock, which the calls
// below would wait for, and one stopped inside poolscope may be between two counts of one call. The
// thread is also taken out of libc's functions that have no symbol (libc's debug symbols are not read):
// malloc's internals, and the vector variants of memset, memcpy, strlen and the like, which keep
// values in the AVX-512 registers; some gdb versions (13, on AMD CPUs with AVX-512) put those back
// wrong after a call, and the function would go on with them. A thread that sits right after a
// syscall instruction is waiting in the kernel, not in such a function, and is left there.
constexpr char kLeaveAllocator[] = R"(python
import re
def _poolscope_in_allocator():
    pattern = re.compile(r"^(__libc_)?(malloc|free|cfree|calloc|realloc|reallocarray|posix_memalign|"
                         r"aligned_alloc|memalign|valloc|pvalloc|_int_.*|malloc_consolidate|sysmalloc|"
                         r"tcache_.*|arena_get2|_mid_memalign)$")
    try:
        frame = gdb.newest_frame()
        pc = frame.pc()
        lib = gdb.solib_name(pc) or ""
        if frame.name() is None and "/libc.so" in lib:
            if bytes(gdb.selected_inferior().read_memory(pc - 2, 2)) != b"\x0f\x05":
                return True
        for _ in range(40):
            if frame is None:
                return False
            name = frame.name()
            if name and (pattern.match(name) or "poolscope::" in name):
                return True
            frame = frame.older()
    except gdb.error:
        pass
    return False
for _ in range(40):
    if not _poolscope_in_allocator():
        break
    try:
        gdb.execute("finish", to_string=True)
    except gdb.error:
        break
end
)";

struct GdbRun {
  int status = -1;
  std::string output;
  double ms = 0;
};

GdbRun RunGdb(const std::string& gdb, pid_t pid, const std::string& script, const std::string& output_path) {
  GdbRun run;
  auto start = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child < 0) throw CliError{"gdb", std::string("fork failed: ") + std::strerror(errno)};
  if (child == 0) {
    setpgid(0, 0);  // the terminal's ^C is this command's to handle, not gdb's
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = open("/dev/null", O_RDONLY);
    int out = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    std::string p = std::to_string(pid);
    execl(gdb.c_str(), gdb.c_str(), "-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex",
          "set debug-file-directory /nonexistent", "-p", p.c_str(), "-x", script.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  run.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run.status = status;
  run.output = ReadSmallFile(output_path);
  return run;
}

// The value gdb printed after `marker ` on a line of its own, if any.
std::optional<std::string> Marked(const std::string& output, const std::string& marker) {
  size_t at = output.find(marker + " ");
  if (at == std::string::npos) return std::nullopt;
  at += marker.size() + 1;
  size_t end = output.find('\n', at);
  return output.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Some gdb and kernel pairs cannot call a function in a process and put its registers back (gdb 13
// with a kernel that needs the whole extended state of a CPU with AMX written at once: "Couldn't write
// extended state status"): every call fails, and the thread it stopped is left in a system call that
// can no longer restart (the program sees errno 516). Tried on a child of this command's own, never on
// the program: the problem in gdb's words, or empty when the call worked.
std::string GdbCallProblem(const std::string& gdb, const std::string& work) {
  pid_t child = fork();
  if (child < 0) return "";
  if (child == 0) {
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    for (;;) pause();
  }
  const std::string script = work + "/probe.gdb";
  {
    std::ofstream s(script);
    s << "set confirm off\nset pagination off\nprintf \"POOLSCOPE-PROBE %d\\n\", (int)getpid()\ndetach\nquit\n";
  }
  GdbRun probe = RunGdb(gdb, child, script, work + "/probe.out");
  kill(child, SIGKILL);
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (Marked(probe.output, "POOLSCOPE-PROBE") == std::to_string(child)) return "";
  std::istringstream lines(probe.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("warning:") != std::string::npos) continue;  // (no index cache in a sandbox, and the like)
    if (line.find("Couldn't") != std::string::npos || line.find("Cannot") != std::string::npos) return OneLine(line);
  }
  return "";  // gdb could not attach to its probe at all: the attach itself will say why
}

// gdb's own words for a failed attach (ptrace refused and the like).
std::string GdbProblem(const GdbRun& run) {
  std::istringstream lines(run.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("ptrace:") != std::string::npos || line.find("Could not attach") != std::string::npos ||
        line.find("not permitted") != std::string::npos) {
      return "gdb could not attach (" + OneLine(line) + ")";
    }
  }
  if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == 127) return "gdb could not be started";
  std::string last;
  std::istringstream again(run.output);
  while (std::getline(again, line)) {
    if (!line.empty()) last = line;
  }
  return "gdb did not load poolscope (" + OneLine(last.empty() ? "no output" : last) + ")";
}

void PrintSummary(const std::string& path, std::ostream& err) {
  absl::StatusOr<Report> loaded = LoadReport(path);
  if (!loaded.ok()) {
    err << fmt::format("poolscope: {}: {}\n", OneLine(path), std::string(loaded.status().message()));
    return;
  }
  const nlohmann::json& doc = loaded->doc;
  std::optional<int64_t> logical = Count(doc, "logical.allocs");
  std::optional<int64_t> hits = Count(doc, "pool.hits");
  err << fmt::format("poolscope: since the attach: {} logical allocations, {} real; {} served from pools "
                     "({}); {} logical blocks live\n",
                     Thousands(logical), Thousands(Count(doc, "real.allocs")), Thousands(hits),
                     Percent(hits, logical), Thousands(Count(doc, "logical.live_blocks")));
  err << fmt::format("poolscope: blocks from before the attach: {} frees, {} reallocs (in no ledger)\n",
                     Thousands(Count(doc, "attach.preexisting_frees")),
                     Thousands(Count(doc, "attach.preexisting_reallocs")));
  err << fmt::format("poolscope: details: poolscope report {}\n", path);
}

int Attach(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string pool = "on", options, output, lib, pid_text;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* name, std::string* into) {
      std::string eq = std::string(name) + "=";
      if (a.rfind(eq, 0) == 0) {
        *into = a.substr(eq.size());
        return true;
      }
      if (a == name) {
        if (i + 1 >= args.size()) throw CliError{name, "needs a value"};
        *into = args[++i];
        return true;
      }
      return false;
    };
    if (a == "-h" || a == "--help") {
      out << kAttachUsage;
      return 0;
    }
    if (value("--pool", &pool) || value("--options", &options) || value("-o", &output) ||
        value("--output", &output) || value("--lib", &lib)) {
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      throw CliError{a.substr(0, a.find('=')), "unknown flag (see poolscope attach --help)"};
    }
    if (!pid_text.empty()) throw CliError{"attach", "one PID only (see poolscope attach --help)"};
    pid_text = a;
  }
  if (pool != "on" && pool != "off") {
    throw CliError{"--pool", fmt::format("expected on or off, got '{}'", OneLine(pool))};
  }
  if (pid_text.empty()) throw CliError{"attach", "missing PID (usage: poolscope attach [FLAGS] PID)"};
  if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9 ||
      std::stol(pid_text) <= 0) {
    throw CliError{pid_text, "not a process id"};
  }
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));

  // --options: key=value entries; pool= is --pool's, report= is taken as -o when -o is not given.
  std::string report_from_options;
  std::string extra = CheckOptions(options, &report_from_options, {"pool"}, " (use --pool)");
  if (!extra.empty()) extra = ":" + extra;

  std::vector<std::string> looked;
  std::string library = Locate({"libpoolscope.so", "interpose", lib, "POOLSCOPE_LIB", args[0]}, &looked);
  if (library.empty()) {
    if (!lib.empty()) throw CliError{"--lib", lib + ": no such file"};
    throw CliError{"libpoolscope.so", "not found (use --lib=PATH or POOLSCOPE_LIB)"};
  }
  library = AbsolutePath(library);

  uid_t uid = geteuid();
  gid_t gid = getegid();
  const std::string refusal = Refusal(pid, &uid, &gid);
  if (!refusal.empty()) throw CliError{fmt::format("process {}", pid), refusal};
  const std::string gdb = FindGdb();

  const std::string work = MakeTempDirectory("poolscope-attach");
  if (const std::string problem = GdbCallProblem(gdb, work); !problem.empty()) {
    throw CliError{gdb, "cannot call functions in a process on this machine (" + problem +
                            "): attaching would break the process, which is left alone; a newer gdb can"};
  }
  // The report is written by the process, as its owner.
  if (geteuid() == 0 && uid != 0 && chown(work.c_str(), uid, gid) != 0) {
    throw CliError{work, std::string("cannot hand the directory to the process's owner: ") + std::strerror(errno)};
  }
  std::string report = !output.empty() ? output : report_from_options;
  const bool temporary = report.empty();
  if (temporary) report = work + "/report.json";
  report = AbsolutePath(report);
  if (report.find('%') == std::string::npos) unlink(report.c_str());
  const std::string target_options =
      std::string("quiet=1") + (pool == "on" ? ":pool=1" : ":pool=0") + extra + ":report=" + report;

  const std::string script = work + "/attach.gdb";
  {
    std::ofstream s(script);
    s << "set confirm off\nset pagination off\nset print thread-events off\n"
      << kLeaveAllocator
      << "call (int)setenv(\"POOLSCOPE_ATTACH\", " << GdbString(target_options) << ", 1)\n"
      << "set $poolscope_handle = (void*)dlopen(" << GdbString(library) << ", 2)\n"
      << "call (int)unsetenv(\"POOLSCOPE_ATTACH\")\n"
      << "if $poolscope_handle == 0\n  printf \"POOLSCOPE-ERROR %s\\n\", (char*)dlerror()\nelse\n"
      << "  printf \"POOLSCOPE-STARTED %d\\n\", (int)poolscope_attach_start()\nend\n"
      << "detach\nquit\n";
    if (!s) throw CliError{script, "cannot be written"};
  }

  // SIGINT and SIGTERM: read from a signalfd once the process runs with poolscope.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);

  GdbRun run = RunGdb(gdb, pid, script, work + "/gdb.out");
  std::optional<std::string> started = Marked(run.output, "POOLSCOPE-STARTED");
  if (!started) {
    if (std::optional<std::string> dl = Marked(run.output, "POOLSCOPE-ERROR")) {
      throw CliError{fmt::format("process {}", pid), "dlopen of libpoolscope.so failed: " + OneLine(*dl)};
    }
    if (kill(pid, 0) != 0 && errno == ESRCH) throw CliError{fmt::format("process {}", pid), "ended during the attach"};
    throw CliError{fmt::format("process {}", pid), GdbProblem(run)};
  }
  const int slots = std::atoi(started->c_str());
  if (slots < 0) {
    throw CliError{fmt::format("process {}", pid),
                      fmt::format("poolscope was loaded but could not start (code {})", slots)};
  }
  std::string exe = ReadSmallFile(fmt::format("/proc/{}/comm", pid));
  while (!exe.empty() && (exe.back() == '\n' || exe.back() == ' ')) exe.pop_back();
  exe = OneLine(exe);
  err << fmt::format("poolscope: attached to process {} ({}) in {:.0f} ms: {} GOT entries now lead to "
                     "poolscope; ^C detaches\n",
                     pid, exe, run.ms, slots);
  err.flush();

  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  int sigfd = signalfd(-1, &stop, SFD_CLOEXEC);
  bool detach = false;
  for (;;) {
    struct pollfd fds[2] = {{sigfd, POLLIN, 0}, {pidfd, POLLIN, 0}};
    int n = poll(fds, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 100);
    if (n < 0 && errno != EINTR) break;
    if (n > 0 && (fds[0].revents & POLLIN)) {
      detach = true;
      break;
    }
    if (pidfd >= 0 ? (n > 0 && (fds[1].revents & POLLIN)) : (kill(pid, 0) != 0 && errno == ESRCH)) break;
  }
  if (pidfd >= 0) close(pidfd);
  if (sigfd >= 0) close(sigfd);

  if (detach && kill(pid, 0) == 0) {
    const std::string detach_script = work + "/detach.gdb";
    {
      std::ofstream s(detach_script);
      s << "set confirm off\nset pagination off\nset print thread-events off\n"
        << kLeaveAllocator << "printf \"POOLSCOPE-DETACHED %d\\n\", (int)poolscope_attach_detach()\n"
        << "detach\nquit\n";
    }
    GdbRun d = RunGdb(gdb, pid, detach_script, work + "/gdb-detach.out");
    std::optional<std::string> done = Marked(d.output, "POOLSCOPE-DETACHED");
    if (!done || std::atoi(done->c_str()) != 0) {
      throw CliError{fmt::format("process {}", pid), "detach failed: " + GdbProblem(d)};
    }
    err << fmt::format("poolscope: detached from process {} in {:.0f} ms; it goes on{}\n", pid, d.ms,
                       pool == "on" ? " (poolscope stays loaded for its pooled blocks)" : "");
  } else {
    err << fmt::format("poolscope: process {} ended\n", pid);
  }
  std::string written = report::FindReport(report, pid);
  if (written.empty()) written = report;
  if (access(written.c_str(), R_OK) != 0) {
    err << fmt::format("poolscope: no report at {} (the process ended without poolscope's exit code "
                       "running: a signal it did not catch)\n",
                       written);
    return 1;
  }
  err << fmt::format("poolscope: report {}{}\n", written, temporary ? " (temporary)" : "");
  PrintSummary(written, err);
  return 0;
}

}  // namespace

int AttachCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    return Attach(args, out, err);
  } catch (const CliError& e) {
    out.flush();
    err << fmt::format("poolscope: {}: {}\n", OneLine(e.subject), OneLine(e.problem));
  } catch (const std::exception& e) {
    out.flush();
    err << fmt::format("poolscope: internal error: {}\n", OneLine(e.what()));
  }
  return 2;
}

}  // namespace poolscope::tools
