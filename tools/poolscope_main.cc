// File: tools/poolscope_main.cc
//
// The entry point of the `poolscope` command; everything else is in commands.cc.
#include <iostream>
#include <string>
#include <vector>

#include "tools/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.empty()) args.push_back("poolscope");
  return poolscope::tools::Main(args, std::cout, std::cerr);
}
