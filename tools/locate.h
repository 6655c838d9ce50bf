// File: tools/locate.h
//
// Finding the files `poolscope` ships with: the preload library libpoolscope.so and the bundled demo
// workload. Search order, first hit wins (each candidate must be a regular file):
//   1. the explicit path (--lib), which must exist;
//   2. an environment variable (POOLSCOPE_LIB for the library);
//   3. next to the poolscope binary: dirname(/proc/self/exe)/NAME;
//   4. where Bazel puts it: dirname(/proc/self/exe)/../PACKAGE/NAME (bazel-bin/interpose/...);
//   5. where scripts/install.sh puts it: dirname(/proc/self/exe)/../lib/NAME (PREFIX/lib/
//      libpoolscope.so), then dirname(/proc/self/exe)/../lib/poolscope/NAME (the demo workload);
//   6. the Bazel runfiles tree: argv[0].runfiles/poolscope/PACKAGE/NAME, /proc/self/exe.runfiles/...,
//      then $RUNFILES_DIR/poolscope/PACKAGE/NAME.
// Paths are returned absolute, so that a child which changes directory still finds the library.
//
// Thread-safety: reads the environment; call from the main thread.
#ifndef POOLSCOPE_TOOLS_LOCATE_H_
#define POOLSCOPE_TOOLS_LOCATE_H_

#include <string>
#include <vector>

namespace poolscope::tools {

struct LocateRequest {
  std::string name;           // "libpoolscope.so"
  std::string package;        // "interpose": its Bazel package
  std::string explicit_path;  // from a flag; empty when not given
  std::string env_var;        // "POOLSCOPE_LIB"; empty for none
  std::string argv0;
};

// Returns the absolute path of the first candidate that is a regular file, else "" with the list
// of places looked at in `*looked`.
std::string Locate(const LocateRequest& request, std::vector<std::string>* looked);

// dirname(/proc/self/exe), or "" when it cannot be read.
std::string SelfDirectory();

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_LOCATE_H_
