// File: interpose/signals.h
//
// The exit report of a process ended by SIGTERM, SIGINT or SIGHUP, and the program's view of those
// signals' dispositions.
//
// Where the default action of one of the three signals is in place at load, poolscope installs a
// handler of its own for it, which writes the exit report (process.reason "signal") and then ends the
// process with that same signal and its default action, so that its parent sees death by the signal.
// The program cannot tell: the interposed sigaction, signal, bsd_signal, ssignal, sysv_signal, sigset,
// sigignore and siginterrupt show it the default action (SIG_DFL, with the mask and flags it was set with) while
// poolscope's handler stands in for it. Whatever else the program sets (a handler, SIG_IGN) is
// installed for real and poolscope steps aside; when it sets SIG_DFL again, poolscope takes the
// signal back. A signal ignored at load (inherited across exec, as nohup does) is never taken. Other
// signals pass straight through. execve() resets handled signals to SIG_DFL, so an exec'd program
// starts from the dispositions it would have had.
//
// The handler is bounded: before writing, it puts SIG_DFL back for its signal, unblocks it and arms
// a timer that sends it to the same thread after kReportDeadlineSeconds, so a report that cannot
// finish (the signal arrived while the thread held glibc's malloc lock or one of poolscope's own)
// still ends in death by the signal, without a report; the signal arriving again, or another of the
// three, ends the process at once. The report is written on a stack mapped for it.
//
// Where the signal lands matters: writing the report calls the allocator below poolscope, which must
// not be re-entered by a thread the signal stopped inside it (glibc's malloc, in a process of one
// thread, takes no lock: re-entered, it corrupts its heap and aborts), nor may the report wait for a
// lock of poolscope's that the same thread holds. So when the signal stops a thread while poolscope
// works on it (`defer` says so: its reentrancy guard is taken, as it is around every call poolscope
// makes to the allocator below), the handler only notes the signal and returns; the report is written,
// and the process ended, when that work is done (RunDeferredSignalReport), well within the deadline.
//
// Thread-safety: the interposed functions may be called from any thread and from signal handlers
// (they block every signal while they read and change the dispositions, under a lock of their own).
// Nothing here is on an allocation path.
#ifndef POOLSCOPE_INTERPOSE_SIGNALS_H_
#define POOLSCOPE_INTERPOSE_SIGNALS_H_

#include <signal.h>

#include <cstdint>

namespace poolscope {

constexpr int kReportDeadlineSeconds = 2;

// Takes SIGTERM, SIGINT and SIGHUP where their default action is in place; later calls do nothing.
// `write_report` writes the exit report; the handler calls it on a stack of its own, with the
// signal recorded for ReportSignal. Called once, at load, after poolscope is initialised.
// `defer(sig)` is asked first, on the thread the signal stopped: true when it took the signal over
// (poolscope was at work there, and RunDeferredSignalReport will run once that work ends).
void InstallSignalReport(void (*write_report)(), bool (*defer)(int sig) = nullptr);
// A signal that `defer` took over: writes its report (counters marked not exact) and ends the process
// with it.
void RunDeferredSignalReport(int sig);

// The signal whose exit report is being written, 0 when none.
int ReportSignal();
// When it arrived (CLOCK_MONOTONIC, ns); 0 when none did. The report must be done within
// kReportDeadlineSeconds of it: the reachability scan is cut off sooner (kScanBudgetMs).
uint64_t ReportSignalNs();
constexpr uint64_t kScanBudgetMs = 1000;
// "SIGTERM", "SIGINT", "SIGHUP", else "SIG<number>".
const char* SignalName(int sig);
// Whether the signal of ReportSignal() interrupted poolscope's own code, which may have stopped
// between two counter updates of one call: the counters are then not exact.
bool SignalInterruptedPoolscope();

// The interposed entry points (libc_override.cc), with glibc's semantics.
int Sigaction(int sig, const struct sigaction* act, struct sigaction* old);
sighandler_t Signal(int sig, sighandler_t handler);  // signal, bsd_signal, ssignal
sighandler_t SysvSignal(int sig, sighandler_t handler);
sighandler_t Sigset(int sig, sighandler_t disp);
int Sigignore(int sig);
int Siginterrupt(int sig, int interrupt);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_SIGNALS_H_
