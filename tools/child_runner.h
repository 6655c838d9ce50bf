// File: tools/child_runner.h
//
// Running the profiled program: fork, then execvp (never through a shell) with the environment
// the preload library reads (LD_PRELOAD, POOLSCOPE_OPTIONS, POOLSCOPE_ROOT_PID, POOLSCOPE_RUN,
// POOLSCOPE_RUN_DIR), then wait4 for its
// status, wall time and peak RSS. While the child runs, SIGINT and SIGQUIT are ignored in
// poolscope (as system(3) does) so that ^C reaches the program and poolscope still reports.
//
// Thread-safety: forks; call from a single-threaded process.
#ifndef POOLSCOPE_TOOLS_CHILD_RUNNER_H_
#define POOLSCOPE_TOOLS_CHILD_RUNNER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace poolscope::tools {

struct ChildSpec {
  std::vector<std::string> argv;        // argv[0] is looked up in PATH, like execvp.
  std::string preload;                  // absolute path of libpoolscope.so
  std::string options;                  // the full POOLSCOPE_OPTIONS value
  std::string progress_label;           // non-empty: show "LABEL: 1.2 s" on stderr while it runs
  std::string stdout_path;              // non-empty: the child's stdout goes to this file (created
                                        // or emptied, mode 0600) instead of poolscope's
  // A run of `poolscope run`/`compare` (docs/report-schema.md, process.run): the child gets
  // POOLSCOPE_RUN=<its pid>-<start, ns since the epoch>, and, when `run_folder` is not empty,
  // POOLSCOPE_RUN_DIR=`run_folder` expanded as a report path (report/report_path.h) with %p the
  // child's pid, %e `run_exe` and %t `run_start`: the folder of the run's reports.
  bool run = false;
  std::string run_folder;
  std::string run_exe;
  std::string run_start;
};

struct ChildResult {
  bool started = false;      // false: fork or exec failed; see `problem`.
  std::string problem;       // "No such file or directory" and the like.
  int exec_errno = 0;        // errno of the failed exec, 0 otherwise
  int exit_status = 0;       // the child's exit status, or 128 + signal
  int signal = 0;            // the signal that ended the child, 0 when it exited
  int pid = 0;
  std::string run;           // POOLSCOPE_RUN as the child got it (with spec.run)
  std::string run_dir;       // POOLSCOPE_RUN_DIR as the child got it (with spec.run_folder)
  double wall_seconds = 0;
  int64_t peak_rss_kib = 0;  // ru_maxrss of the child
};

// The environment of the child: the current one with LD_PRELOAD=`preload` put first (existing
// entries kept after it), POOLSCOPE_OPTIONS=`options`, and POOLSCOPE_ROOT_PID left to fill in.
// Exposed for tests.
std::vector<std::string> ChildEnvironment(char** current, const std::string& preload,
                                          const std::string& options);

// Runs the child to its end.
ChildResult RunChild(const ChildSpec& spec);

// The base name of `program` as execvp would run it, symbolic links resolved (`sh` -> `dash`): what
// `%e` becomes in its report's name, but for a script, whose report names its interpreter.
std::string ProgramName(const std::string& program);

// Why the dynamic linker would not load the preload library into `program` (looked up in PATH
// like execvp; a "#!" script is judged by its interpreter), as a phrase for a message: "it is
// statically linked", "it is set-user-ID", ... Empty when nothing is in the way, or when the file
// cannot be read (the exec then says what is wrong).
std::string PreloadObstacle(const std::string& program);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_CHILD_RUNNER_H_
