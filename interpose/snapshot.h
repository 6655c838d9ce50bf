// File: interpose/snapshot.h
//
// What the report is made of: process facts gathered at start-up, per-thread records of ended threads,
// and a snapshot of every counter taken under the registry lock. Also the report writer's entry points.
// Nothing here runs on the allocation path.
#ifndef POOLSCOPE_INTERPOSE_SNAPSHOT_H_
#define POOLSCOPE_INTERPOSE_SNAPSHOT_H_

#include <sys/types.h>

#include <cstdint>

#include "interpose/counters.h"
#include "interpose/internal.h"
#include "interpose/options.h"
#include "pool/pool.h"

namespace poolscope {

struct ProcessInfo {
  pid_t pid;
  pid_t ppid;
  pid_t forked_from;  // 0 unless a child of fork() that has not exec'd
  pid_t root_pid;     // POOLSCOPE_ROOT_PID, 0 when unset
  char run[64];       // POOLSCOPE_RUN: the run of `poolscope run`/`compare` this process belongs to, "" when unset
  char run_dir[1024];  // POOLSCOPE_RUN_DIR: the folder of that run's reports, "" when unset
  uint64_t start_ns;
  char exe[1024];
  char cwd[1024];
  char* argv;  // NUL-separated, from /proc/self/cmdline (internal memory)
  size_t argv_bytes;
};

struct ThreadRecord {
  int tid;
  bool ended;
  ThreadCounters c;
  pool::PoolStats pool;
  ThreadRecord* next;
};

struct LiveThread {
  int tid;
  bool self;
  int cached;
  ThreadCounters c;
  pool::PoolStats pool;
};

struct Snapshot {
  static constexpr int kMaxLive = 64;
  ThreadCounters totals;
  TrackedBytes tracked_bytes;  // every thread's (TrackedBytesNow)
  pool::PoolStats pool;
  InternalCounters internal;
  uint64_t pools_cached;
  bool pooling;
  size_t pool_size;
  int pools_per_thread;
  const ThreadRecord* records;
  uint64_t records_omitted;
  int64_t fork_carryover;  // see ReconciliationGap
  uint64_t threads_lost_at_fork;  // other threads of the parent, whose counters a fork child drops
  uint64_t drained_at_exit;       // pools released by drain_at_exit=1
  int live_threads;
  LiveThread live[kMaxLive];
};

// real_live_blocks - (unpooled_live_blocks + pools_cached + pools_in_use) - fork_carryover: zero when the
// reconciliation balances. fork_carryover is the gap a fork() child inherited from threads that fork
// stopped between two counter updates of one call (measured in the child before it runs on).
int64_t ReconciliationGap(const Snapshot& s);

// logical.live_blocks: logical blocks created less those released (negative when the program frees
// blocks allocated before poolscope was loaded).
inline int64_t LogicalLive(const Snapshot& s) {
  const Ledger logical = Logical(s.totals);
  return static_cast<int64_t>(logical.nallocs - logical.nfrees);
}

uint64_t NowNs();
void InitProcessInfo(ProcessInfo* p, const Options& o);
void TakeSnapshot(Snapshot* s);
const Options& CurrentOptions();
const ProcessInfo& CurrentProcess();
// Remembers a bad free of a pooled block for the report's `errors` (the count is in the pool stats).
void RecordBadFree(const void* p, bool is_double);
void StartSnapshots(const Options& o);
// Under `poolscope run`/`compare`, in every process but the root (at load, and in a fork() child):
// leaves ".poolscope-started.<root_pid>.<pid>" in the report's folder (the run's folder,
// POOLSCOPE_RUN_DIR, when set), holding "<parent pid> <exe>",
// so that the command learns of a descendant that ended without writing a report. Allocates nothing.
void NoteStarted();
// Writes the exit report, once per process (later calls do nothing and return 0), and the one line
// on stderr about it. Returns the status leak_exitcode asks the process to end with (0: keep its own),
// which is never other than 0 unless `may_change_status`.
int WriteReportAtExit(const Options& o, bool may_change_status);

// Every counter now, in poolscope's own memory; null when that cannot be had.
class SnapshotNow {
 public:
  SnapshotNow() : s_(static_cast<Snapshot*>(InternalAlloc(sizeof(Snapshot)))) {
    if (s_ != nullptr) TakeSnapshot(s_);
  }
  ~SnapshotNow() {
    if (s_ != nullptr) InternalFree(s_, sizeof(Snapshot));
  }
  SnapshotNow(const SnapshotNow&) = delete;
  SnapshotNow& operator=(const SnapshotNow&) = delete;
  const Snapshot* get() const { return s_; }

 private:
  Snapshot* s_;
};

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_SNAPSHOT_H_
