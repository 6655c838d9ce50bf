// File: interpose/report_writer.cc
//
// Writes the JSON report (docs/report-schema.md) at exit and on snapshots: rendered (report_render.h)
// through a small buffer, written atomically (a temporary file in the same folder, then rename; mode
// 0600; O_NOFOLLOW, so a symbolic link is never followed). A path that names an existing character
// device or pipe is written to directly. Runs under the caller's reentrancy guard: libc calls made here pass straight through.
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/attach.h"
#include "interpose/internal.h"
#include "interpose/leak_exit.h"
#include "interpose/leak_scan.h"
#include "interpose/report_render.h"
#include "interpose/signals.h"
#include "interpose/snapshot.h"
#include "interpose/thread_state.h"
#include "interpose/tracking.h"
#include "report/json_writer.h"
#include "report/report_path.h"
#include "track/frame_rule_store.h"

namespace poolscope {

namespace {

SpinLock g_write_lock;
bool g_exit_written = false;

void Warn(const Options& o, const char* what, const char* path) {
  if (o.quiet) return;
  char line[1400];
  snprintf(line, sizeof line, "poolscope: warning: %s %s: %s", what, path, strerror(errno));
  RawLine(line);
}

const char* Basename(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// A process of a run of `poolscope run`/`compare` other than the one it started: a fork() child, or
// a process exec'd under the root.
bool Descendant(const ProcessInfo& p) {
  return p.forked_from != 0 || (p.root_pid != 0 && p.root_pid != p.pid);
}

// Under `poolscope run`/`compare`, a descendant writes into the run's own folder (POOLSCOPE_RUN_DIR),
// which the first one to write there makes (its parent was made, or checked, before the run began).
// Returns the folder, or null when the report goes where its template says.
const char* RunDir(const ProcessInfo& p) {
  if (p.run_dir[0] == '\0' || !Descendant(p)) return nullptr;
  mkdir(p.run_dir, 0777);
  return p.run_dir;
}

// Expands the template (report/report_path.h) and resolves a relative path against the start-up
// folder; a descendant's file goes to the run's folder (RunDir, which makes it). False if it does not
// fit.
bool ExpandPath(const Options& o, const ProcessInfo& p, char* out, size_t cap) {
  char start[24];
  report::ReportPathValues values;
  values.dir = p.cwd;
  values.pid = static_cast<int>(p.pid);
  values.exe = Basename(p.exe);
  values.start = report::FormatDecimal(p.start_ns / 1000000000ull, start);
  const report::ExpandedReportPath expanded = report::ExpandReportPath(o.report, values, out, cap);
  size_t n = expanded.length;
  if (n >= cap) return false;
  // Two processes never share one report: a fork() child, or an exec'd descendant of `poolscope run`,
  // gets its pid appended when the path has no %p.
  if (!expanded.has_pid && Descendant(p)) {
    char num[24];
    report::FormatDecimal(static_cast<uint64_t>(p.pid), num);
    size_t k = strlen(num);
    if (n + 1 + k >= cap) return false;
    out[n] = '.';
    memcpy(out + n + 1, num, k + 1);
  }
  if (const char* dir = RunDir(p)) {
    // The file's name in the run's folder.
    const char* slash = strrchr(out, '/');
    const char* name = slash != nullptr ? slash + 1 : out;
    const size_t d = strlen(dir), k = strlen(name);
    if (d + 1 + k >= cap) return false;
    memmove(out + d + 1, name, k + 1);
    memcpy(out, dir, d);
    out[d] = '/';
  }
  return true;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Streams the rendered report into a file through a small buffer of poolscope's memory: a report of
// some hundreds of kilobytes costs the same few pages as a small one (a buffer holding it whole was
// faulted in a page at a time, 60 faults for a compiler's report).
class FileSink : public report::JsonSink {
 public:
  explicit FileSink(int fd) : fd_(fd), buf_(static_cast<char*>(InternalAlloc(kBuffer))) {
    no_memory_ = buf_ == nullptr;
    SetBuffer(buf_, kBuffer);
  }
  ~FileSink() override {
    if (buf_ != nullptr) InternalFree(buf_, kBuffer);
  }
  // Writes what is buffered; true when every byte appended reached the file.
  bool Finish() {
    Flush();
    return ok();
  }
  bool no_memory() const { return no_memory_; }

 private:
  static constexpr size_t kBuffer = size_t{16} << 10;
  bool ok() const { return !no_memory_ && !write_failed_; }
  void Write(const char* s, size_t n) override {
    if (ok()) write_failed_ = !WriteAll(fd_, s, n);
  }
  const int fd_;
  char* const buf_;
  bool no_memory_ = false;
  bool write_failed_ = false;
};

// Returns true when the report was written.
bool WriteReport(const char* reason, const Snapshot& snap, const LeakCheck* check, char* path_out,
                 size_t path_cap) {
  const Options& o = CurrentOptions();
  if (strcmp(o.report, "none") == 0) return false;
  const uint64_t started_ns = MonotonicNs();
  const ProcessInfo& p = CurrentProcess();
  if (!ExpandPath(o, p, path_out, path_cap)) {
    errno = ENAMETOOLONG;
    Warn(o, "cannot write the report to", o.report);
    return false;
  }
  // Renders the report into fd; true when all of it was written. *no_memory: no buffer could be had.
  auto render_into = [&](int fd, bool* no_memory) {
    FileSink sink(fd);
    report::JsonWriter w(&sink);
    *no_memory = sink.no_memory();
    if (!*no_memory) Render(w, reason, o, p, snap, check, path_out, started_ns);
    return sink.Finish();
  };
  auto warn = [&](bool no_memory) {
    Warn(o, no_memory ? "out of memory writing the report to" : "cannot write the report to", path_out);
  };
  bool no_memory = false;
  struct stat st;
  if (stat(path_out, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    int fd = open(path_out, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      warn(false);
      return false;
    }
    const bool ok = render_into(fd, &no_memory);
    if (!ok) {
      if (no_memory) errno = ENOMEM;
      warn(no_memory);
    }
    close(fd);
    return ok;
  }
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path_out, static_cast<int>(getpid()));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    warn(false);
    return false;
  }
  bool ok = render_into(fd, &no_memory);
  int saved = no_memory ? ENOMEM : errno;
  ok = (close(fd) == 0) && ok;
  if (!ok || rename(tmp, path_out) != 0) {
    if (ok) saved = errno;
    unlink(tmp);
    errno = saved;
    warn(no_memory);
    return false;
  }
  return true;
}

void* SnapshotLoop(void* arg) {
  // This thread is poolscope's own: everything it allocates passes straight through.
  BecomeOwnThread(CurrentThread());
  int interval = *static_cast<int*>(arg);
  for (;;) {
    struct timespec ts = {interval, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    SpinLockHolder lock(&g_write_lock);
    if (g_exit_written) break;
    char path[1200];
    SnapshotNow snap;
    if (snap.get() != nullptr) WriteReport("snapshot", *snap.get(), nullptr, path, sizeof path);
  }
  return nullptr;
}

}  // namespace

int64_t ReconciliationGap(const Snapshot& s) {
  const Ledger logical = Logical(s.totals);
  const Ledger real = Real(s.totals);
  int64_t real_live = static_cast<int64_t>(real.nallocs - real.nfrees);
  int64_t logical_live = static_cast<int64_t>(logical.nallocs - logical.nfrees);
  int64_t pooled_live = static_cast<int64_t>(s.pool.hits - s.pool.pooled_frees);
  int64_t pools = static_cast<int64_t>(s.pool.pools_created - s.pool.pools_released);
  return real_live - (logical_live - pooled_live) - pools - s.fork_carryover;
}

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void InitProcessInfo(ProcessInfo* p, const Options& o) {
  (void)o;
  p->pid = getpid();
  p->ppid = getppid();
  p->forked_from = 0;
  p->start_ns = NowNs();
  const char* root = getenv("POOLSCOPE_ROOT_PID");
  p->root_pid = root != nullptr ? static_cast<pid_t>(atoi(root)) : 0;
  // The run and its folder, set by `poolscope run`/`compare` beside POOLSCOPE_ROOT_PID; a value that
  // does not fit is left out (the report then goes where its template says).
  const char* run = getenv("POOLSCOPE_RUN");
  p->run[0] = '\0';
  if (p->root_pid != 0 && run != nullptr && strlen(run) < sizeof p->run) strcpy(p->run, run);
  const char* run_dir = getenv("POOLSCOPE_RUN_DIR");
  p->run_dir[0] = '\0';
  if (p->root_pid != 0 && run_dir != nullptr && run_dir[0] == '/' && strlen(run_dir) < sizeof p->run_dir) {
    strcpy(p->run_dir, run_dir);
  }
  ssize_t n = readlink("/proc/self/exe", p->exe, sizeof p->exe - 1);
  p->exe[n > 0 ? n : 0] = '\0';
  if (getcwd(p->cwd, sizeof p->cwd) == nullptr) p->cwd[0] = '\0';
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    constexpr size_t kCap = 64 << 10;
    p->argv = static_cast<char*>(InternalAlloc(kCap));
    size_t len = 0;
    ssize_t k;
    while (p->argv != nullptr && len < kCap && (k = read(fd, p->argv + len, kCap - len)) > 0) {
      len += static_cast<size_t>(k);
    }
    p->argv_bytes = len;
    close(fd);
  }
}

void NoteStarted() {
  const Options& o = CurrentOptions();
  const ProcessInfo& p = CurrentProcess();
  if (p.root_pid == 0 || p.root_pid == p.pid || strcmp(o.report, "none") == 0) return;
  char path[1200];
  if (!ExpandPath(o, p, path, sizeof path)) return;
  char* slash = strrchr(path, '/');
  if (slash == nullptr) return;
  const size_t room = sizeof path - static_cast<size_t>(slash + 1 - path);
  int n = snprintf(slash + 1, room, ".poolscope-started.%d.%d", static_cast<int>(p.root_pid),
                   static_cast<int>(p.pid));
  if (n < 0 || static_cast<size_t>(n) >= room) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  char line[1100];
  const pid_t parent = p.forked_from != 0 ? p.forked_from : p.ppid;
  n = snprintf(line, sizeof line, "%d %s\n", static_cast<int>(parent), p.exe);
  if (n > 0) WriteAll(fd, line, static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
  close(fd);
}

void StartSnapshots(const Options& o) {
  if (o.snapshot_interval <= 0 || strcmp(o.report, "none") == 0) return;
  static int interval = o.snapshot_interval;
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_create(&thread, &attr, SnapshotLoop, &interval);
  pthread_attr_destroy(&attr);
}

int WriteReportAtExit(const Options& o, bool may_change_status) {
  SpinLockHolder lock(&g_write_lock);
  if (g_exit_written) return 0;
  g_exit_written = true;
  // The frame rules this process computed, for the next one (report=none too); before the report,
  // whose symbolizer unloads libdw, which makes the cached rules forget themselves.
  track::SaveFrameRuleStore();
  if (o.leak_exitcode <= 0 && strcmp(o.report, "none") == 0) return 0;
  SnapshotNow snap;
  if (snap.get() == nullptr) return 0;
  LeakCheck check = {o.leak_exitcode, {}, -1, 0};
  if (o.leak_exitcode > 0) {
    CountProgramLeaks(LogicalLive(*snap.get()), &check.leaks);
    // After a scan, the kinds leak_kinds names decide: what memcheck would call an error, never the
    // blocks the program still points to.
    if (const ScanOutcome* scan = LastScan(); scan != nullptr && scan->scanned) {
      const track::ReachabilityResult& r = scan->program;
      check.lost_blocks = ((o.leak_kinds & kLeakDefinite) ? r.definitely_lost.blocks : 0) +
                          ((o.leak_kinds & kLeakIndirect) ? r.indirectly_lost.blocks : 0) +
                          ((o.leak_kinds & kLeakPossible) ? r.possibly_lost.blocks : 0) +
                          ((o.leak_kinds & kLeakReachable) ? r.still_reachable.blocks : 0);
    }
    const int64_t judged = check.lost_blocks >= 0 ? check.lost_blocks : check.leaks.blocks;
    if (may_change_status && judged > 0) check.exit_status = o.leak_exitcode;
  }
  char path[1200];
  const char* reason = ReportSignal() != 0 ? "signal" : AttachDetaching() ? "detach" : "exit";
  bool written = WriteReport(reason, *snap.get(), o.leak_exitcode > 0 ? &check : nullptr, path, sizeof path);
  if (const uint64_t unrecorded = TrackingUnrecorded(); unrecorded != 0 && !o.quiet) {
    char line[300];
    snprintf(line, sizeof line,
             "poolscope: warning: %llu allocation%s could not be recorded (no memory for the live-block "
             "table: an address-space limit?): the report's leaks are incomplete (tracked: false)",
             static_cast<unsigned long long>(unrecorded), unrecorded == 1 ? "" : "s");
    RawLine(line);
  }
  // Under `poolscope run`/`compare` only the process poolscope started says where its report went;
  // its descendants write theirs silently into the same folder, which the command names once.
  const ProcessInfo& self = CurrentProcess();
  const bool descendant = self.root_pid != 0 && self.root_pid != self.pid;
  if (!o.quiet && ((written && !descendant) || check.exit_status != 0)) {
    // One line, whatever happened.
    char status[160] = "";
    const long long judged_blocks = check.lost_blocks >= 0 ? check.lost_blocks : check.leaks.blocks;
    if (check.exit_status != 0) {
      // Lost blocks (definitely or indirectly) when the scan ran, else the blocks left unfreed.
      snprintf(status, sizeof status, "%sthe program %s %lld block%s%s: exit status %d (leak_exitcode)",
               written && !descendant ? "; " : "", check.lost_blocks >= 0 ? "loses" : "leaves",
               static_cast<long long>(judged_blocks), judged_blocks == 1 ? "" : "s",
               check.lost_blocks >= 0 ? " (definitely or indirectly lost)" : " unfreed", check.exit_status);
    }
    char line[1400];
    if (written && !descendant) {
      snprintf(line, sizeof line, "poolscope: report written to %s%s", path, status);
    } else {
      snprintf(line, sizeof line, "poolscope: %s", status);
    }
    RawLine(line);
  }
  return check.exit_status;
}

}  // namespace poolscope
