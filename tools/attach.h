// File: tools/attach.h
//
// `poolscope attach [--pool=on|off] [--options=K=V:...] [-o REPORT] [--lib=PATH] PID`: loads
// libpoolscope.so into a running process through gdb (dlopen, then poolscope_attach_start, which
// rewrites the process's GOT entries of the allocator functions: interpose/attach.cc), waits for the
// process to end, and prints where its report is and what it says. ^C (SIGINT) or SIGTERM detaches:
// gdb calls poolscope_attach_detach, which writes the report, and the process goes on.
//
// A process that cannot be attached (no such pid, another user's without the privilege, ptrace
// refused, statically linked, already attached, gdb missing) gets one line saying which and exit
// status 2, the process untouched.
//
// Thread-safety: blocks SIGINT and SIGTERM in the calling thread while it waits; call it from a
// single-threaded process.
#ifndef POOLSCOPE_TOOLS_ATTACH_H_
#define POOLSCOPE_TOOLS_ATTACH_H_

#include <ostream>
#include <string>
#include <vector>

namespace poolscope::tools {

extern const char kAttachUsage[];

// args[0] is the program name, args[1] "attach". Returns the exit status; every error is one line
// on `err` and status 2.
int AttachCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_ATTACH_H_
