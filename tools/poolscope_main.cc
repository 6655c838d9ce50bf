// File: tools/poolscope_main.cc
//
// The entry point of the `poolscope` command; everything else is in commands.cc.
//
// Under `bazel run` the command starts in its runfiles tree, not in the caller's folder; Bazel names
// that folder in BUILD_WORKING_DIRECTORY, so relative paths (reports, `-o`, `./prog`) are resolved
// against it by starting there.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tools/commands.h"

int main(int argc, char** argv) {
  const char* caller = getenv("BUILD_WORKING_DIRECTORY");
  if (caller != nullptr && *caller != '\0' && chdir(caller) != 0) {
    std::cerr << "poolscope: BUILD_WORKING_DIRECTORY: " << caller << ": " << strerror(errno) << "\n";
    return 2;
  }
  std::vector<std::string> args(argv, argv + argc);
  if (args.empty()) args.push_back("poolscope");
  return poolscope::tools::Main(args, std::cout, std::cerr);
}
