// A shared object linking all of track/, loaded by shared_object_test: proves the libraries are
// position-independent, and that the unwinder and the symbolizer (libdw loaded with dlopen) work from a shared object.
#include <cstdlib>
#include <cstring>

#include "track/live_table.h"
#include "track/stack_capture.h"
#include "track/stack_depot.h"
#include "track/symbolizer.h"

namespace {

class MallocMemory : public poolscope::track::DepotMemory {
 public:
  void* Alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) & ~size_t{63};
    void* p = aligned_alloc(64, rounded);
    if (p != nullptr) memset(p, 0, rounded);
    return p;  // kept for the life of the process, as in the preload library
  }
};

}  // namespace

// 0 when every piece works from inside this shared object.
extern "C" __attribute__((visibility("default"))) int poolscope_track_link_check() {
  using namespace poolscope::track;
  static MallocMemory memory;
  static StackDepot depot(&memory, 1024);
  static LiveTable table(&memory, 16);
  uintptr_t pcs[16];
  int n = CaptureStack(pcs, 16, 0);
  if (n < 2) return 1;
  uint32_t id = depot.Insert(pcs, n);
  if (id < kFirstStackId || depot.Insert(pcs, n) != id) return 2;
  if (table.Insert(0x1000, 16, id, 0) != InsertResult::kInserted) return 3;
  LiveEntry e;
  if (!table.Erase(0x1000, &e) || e.stack_id != id) return 4;
  Symbolizer sym;
  SymbolizedFrame f = sym.SymbolizeReturnAddress(pcs[0]);
  if (f.object.find("libtrack_link_check.so") == std::string::npos) return 5;
  return 0;
}
