// File: tools/locate.cc
//
// See locate.h.
#include "tools/locate.h"

#include <climits>
#include <cstdlib>

#include <sys/stat.h>
#include <unistd.h>

namespace poolscope::tools {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat info;
  return !path.empty() && stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  return path;
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string SelfDirectory() {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  buffer[n] = '\0';
  return Dirname(buffer);
}

std::string Locate(const LocateRequest& request, std::vector<std::string>* looked) {
  std::vector<std::string> candidates;
  if (!request.explicit_path.empty()) {
    candidates.push_back(request.explicit_path);
  } else {
    if (!request.env_var.empty()) {
      const char* from_env = getenv(request.env_var.c_str());
      if (from_env != nullptr && *from_env != '\0') candidates.push_back(from_env);
    }
    std::string self = SelfDirectory();
    if (!self.empty()) {
      candidates.push_back(self + "/" + request.name);
      candidates.push_back(self + "/../" + request.package + "/" + request.name);
      candidates.push_back(self + "/../lib/" + request.name);
      candidates.push_back(self + "/../lib/poolscope/" + request.name);
    }
    const std::string runfiles_path = "/poolscope/" + request.package + "/" + request.name;
    if (!request.argv0.empty()) {
      candidates.push_back(request.argv0 + ".runfiles" + runfiles_path);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
      exe[n] = '\0';
      candidates.push_back(std::string(exe) + ".runfiles" + runfiles_path);
    }
    const char* runfiles_dir = getenv("RUNFILES_DIR");
    if (runfiles_dir != nullptr && *runfiles_dir != '\0') {
      candidates.push_back(runfiles_dir + runfiles_path);
    }
  }
  for (const std::string& candidate : candidates) {
    if (IsRegularFile(candidate)) return Absolute(candidate);
    if (looked != nullptr) looked->push_back(candidate);
  }
  return "";
}

}  // namespace poolscope::tools
