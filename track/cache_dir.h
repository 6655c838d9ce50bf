// File: track/cache_dir.h
//
// Where poolscope keeps what one process leaves for the next: $XDG_CACHE_HOME/poolscope/<sub> when
// that variable is an absolute path, else $HOME/.cache/poolscope/<sub> ("debug", "symbols", "frames").
// Allocation-free: the frame-rule store asks at start-up, inside the first allocation.
//
// Thread-safety: reads the environment only.
#ifndef POOLSCOPE_TRACK_CACHE_DIR_H_
#define POOLSCOPE_TRACK_CACHE_DIR_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace poolscope {
namespace track {

// Writes the path of the cache's directory `sub` (nothing is made) to out[0, room), terminated; false
// when neither variable is an absolute path or the path does not fit.
inline bool CacheDirPath(const char* sub, char* out, size_t room) {
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  const char* base = xdg != nullptr && xdg[0] == '/' ? xdg : home != nullptr && home[0] == '/' ? home : nullptr;
  if (base == nullptr) return false;
  const char* mid = base == xdg ? "/poolscope/" : "/.cache/poolscope/";
  const size_t a = strlen(base), b = strlen(mid), c = strlen(sub);
  if (a + b + c >= room) return false;
  memcpy(out, base, a);
  memcpy(out + a, mid, b);
  memcpy(out + a + b, sub, c + 1);
  return true;
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_CACHE_DIR_H_
