// File: report/suppressions.h
//
// `poolscope suppressions`: entries for an existing leak checker (LeakSanitizer, valgrind's
// memcheck, heaptrack) that mark poolscope's pools as expected, so a leak check that passed without
// poolscope still passes with pooling on. Every allocation the program makes passes through
// libpoolscope.so's malloc, so matching that object would hide the program's own leaks too; the
// entries match instead the one function that makes each pool's real allocation,
// poolscope::(anonymous namespace)::ShimBackend::AllocPool (interpose/pool_backend.cc), which is on every
// pool's allocation stack: as the top frame under memcheck with valgrind=1 (it describes the pool
// there), as the caller of poolscope_pool_alloc under memcheck with valgrind=0 and under heaptrack.
// LeakSanitizer's default unwinder follows frame pointers, which libpoolscope.so's functions do not
// keep: of a pool's stack it finds the function that called the allocator, poolscope_pool_alloc or
// poolscope::PoolFromMalloc (both make pools and nothing else), so its entries name those too.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_SUPPRESSIONS_H_
#define POOLSCOPE_REPORT_SUPPRESSIONS_H_

#include <string>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// The `leak:` lines of the lsan and heaptrack formats (matched as substrings of demangled names).
inline constexpr const char* kLeakSuppressions[] = {
    "leak:ShimBackend::AllocPool",
    "leak:poolscope::PoolFromMalloc",
    "leak:poolscope_pool_alloc",
};
// The frame line of the valgrind format (memcheck matches fun: against mangled names).
inline constexpr char kValgrindFrame[] = "fun:_ZN9poolscope*ShimBackend9AllocPool*";

enum class SuppressionFormat { kLsan, kValgrind, kHeaptrack };

// Parses "lsan", "valgrind" or "heaptrack".
bool ParseSuppressionFormat(const std::string& name, SuppressionFormat* format);

// The suppression file's text, with a comment naming the report and its pool figures.
std::string Suppressions(const nlohmann::json& report, const std::string& path,
                         SuppressionFormat format);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_SUPPRESSIONS_H_
