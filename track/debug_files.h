// File: track/debug_files.h
//
// Where the symbolizer finds what it reads: the separate debug files (the build-id tree and
// .gnu_debuglink, local only, with an uncompressed copy of a compressed one kept on disk), the cache
// directories, and the names that identify an object (its build id, or its file when it has none).
#ifndef POOLSCOPE_TRACK_DEBUG_FILES_H_
#define POOLSCOPE_TRACK_DEBUG_FILES_H_

#include <elfutils/libdwfl.h>

#include <cstddef>
#include <cstdint>
#include <string>

struct dl_phdr_info;

namespace poolscope {
namespace track {

// $XDG_CACHE_HOME/poolscope/<sub>, else $HOME/.cache/poolscope/<sub>, made (0700) if missing: "debug"
// for uncompressed copies of debug files, "symbols" for answers already found. Empty when neither
// variable is usable or the directory cannot be made.
std::string CacheDir(const char* sub);

// Lower-case hex of n bytes.
std::string HexBytes(const unsigned char* p, size_t n);

// Where Debian's -dbg packages put the separate debug file of the object with build id `hex`.
std::string BuildIdDebugPath(const std::string& hex);

// The GNU build id of the loaded object whose segments hold `pc`, read from its PT_NOTE segments in
// memory (no file is opened). Empty when the object has none.
struct BuildIdQuery {
  uintptr_t pc;
  std::string hex;
};
// For dl_iterate_phdr, with a BuildIdQuery as `arg`.
int FindBuildId(struct dl_phdr_info* info, size_t, void* arg);

// A name for the object file at `path` when it has no build id (Rust's toolchain ships libLLVM and
// rust-lld without one): its device, inode, size and modification and change times, so that a file
// rebuilt or replaced in place gets a table of its own. Empty when the file cannot be stat'ed.
std::string FileIdentity(const std::string& path);

// libdwfl's callbacks: local debug files only (FindLocalDebuginfo); find_elf is libdw's
// dwfl_linux_proc_find_elf, set by the Symbolizer once libdw is loaded.
extern Dwfl_Callbacks g_debuginfo_callbacks;

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_DEBUG_FILES_H_
