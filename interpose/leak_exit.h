// File: interpose/leak_exit.h
//
// leak_exitcode=N: whether the program itself leaks when it calls exit() (or returns from main), and
// ending the process with status N when it does, without losing the output it left in stdio buffers.
//
// The program's own leaks are the logical blocks live at exit, less two kinds that the program could
// not have freed: the blocks already live when this process's own code began (allocated by library
// initialisers before poolscope's constructor ran, such as libstdc++'s emergency exception pool, or,
// in a fork() child, everything live at the fork: the parent's blocks), and the buffers that stdio
// allocated for stdin, stdout and stderr. Pools are never counted: they are not logical blocks.
// Pooled blocks the program still holds are. With track=1 the live blocks are counted one by one;
// with track=0 from the logical ledger (see docs/report-schema.md, `leak_check`).
//
// Thread-safety: TakeLeakBaseline runs at start-up and in a fork() child, under the caller's guard;
// CountProgramLeaks may run while other threads allocate (they make it approximate, as they make the
// report's ledgers); ExitForLeaks from the exiting thread, once.
#ifndef POOLSCOPE_INTERPOSE_LEAK_EXIT_H_
#define POOLSCOPE_INTERPOSE_LEAK_EXIT_H_

#include <cstdint>

namespace poolscope {

struct ProgramLeaks {
  int64_t live_blocks;    // logical blocks live at exit (track=0: from the ledger, so possibly < 0)
  int64_t live_at_start;  // of them, live when the process's own code began (not counted)
  int64_t stdio_buffers;  // of them, buffers stdio allocated for stdin, stdout, stderr (not counted)
  int64_t blocks;         // the program's own leaks: the rest, never below 0
  bool exact;             // counted block by block (track=1); else from the ledger
};

// Records what is live now as not the program's: called from the library's constructor and in a
// fork() child. `logical_live`: the logical ledger's live blocks now (used with track=0).
void TakeLeakBaseline(int64_t logical_live);

// The program's leaks now, measured against the baseline. `logical_live` as above.
void CountProgramLeaks(int64_t logical_live, ProgramLeaks* out);

// Flushes what stdio holds, as far as that is safe with other threads about (see leak_exit.cc), and
// ends the process with `status` through the real _exit.
[[noreturn]] void ExitForLeaks(int status);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_LEAK_EXIT_H_
