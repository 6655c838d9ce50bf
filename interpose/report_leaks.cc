// File: interpose/report_leaks.cc
//
// See report_leaks.h. Runs under the caller's reentrancy guard: libc calls made here pass straight
// through.
#include "interpose/report_leaks.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "interpose/leak_scan.h"
#include "interpose/shim.h"
#include "interpose/shim_internal.h"
#include "interpose/tracking.h"
#include "track/key_index.h"
#include "track/loaded_objects.h"
#include "track/proc_maps.h"
#include "track/symbolizer.h"

namespace poolscope {

namespace {

const char* KindName(uint8_t kind) {
  switch (static_cast<track::LeakKind>(kind)) {
    case track::LeakKind::kDefinitelyLost:
      return "definitely_lost";
    case track::LeakKind::kIndirectlyLost:
      return "indirectly_lost";
    case track::LeakKind::kPossiblyLost:
      return "possibly_lost";
    case track::LeakKind::kStillReachable:
      break;
  }
  return "still_reachable";
}

void WriteTotal(report::JsonWriter& w, const char* key, const track::LeakTotal& t) {
  w.Key(key);
  w.BeginObject();
  w.Field("blocks", t.blocks);
  w.Field("bytes", t.bytes);
  w.EndObject();
}

// The live blocks that exist only because poolscope is loaded: those whose first program frame lies in
// an object that only libpoolscope.so needs (none while it needs only libc and the dynamic loader), and
// the names of those objects.
struct LoadedByPoolscope {
  track::LeakTotal total = {};
  std::vector<std::string> objects;
};

LoadedByPoolscope CountLoadedByPoolscope(const std::vector<LeakGroup>& groups, track::Symbolizer* sym) {
  LoadedByPoolscope out;
  if (sym == nullptr) return out;
  // Room for a small process's objects, else for as many as there are (1,024 of them zeroed for each
  // report were 14 fresh pages, a tenth of a millisecond of a small process's exit).
  std::vector<track::LoadedObject> objs(64);
  size_t n = track::ReadLoadedObjects(objs.data(), objs.size());
  if (n > objs.size()) {
    objs.resize(n + 16);
    n = track::ReadLoadedObjects(objs.data(), objs.size());
    if (n > objs.size()) n = objs.size();
  }
  const track::LoadedObject* self =
      track::ObjectContaining(objs.data(), n, reinterpret_cast<uintptr_t>(&CountLoadedByPoolscope));
  if (self == nullptr) return out;
  std::vector<uint8_t> scratch(n);
  track::MarkLoadedOnlyFor(static_cast<size_t>(self - objs.data()), objs.data(), n, scratch.data());
  for (const LeakGroup& g : groups) {
    uintptr_t pcs[track::kMaxStackDepth];
    if (ProgramFrames(sym, g.stack_id, pcs) == 0) continue;
    const track::LoadedObject* o = track::ObjectContaining(objs.data(), n, pcs[0] - 1);
    if (o == nullptr || !o->only_for_poolscope) continue;
    out.total.blocks += g.blocks;
    out.total.bytes += g.bytes;
    const char* slash = strrchr(o->path, '/');
    std::string name = o->soname != nullptr ? o->soname : (slash != nullptr ? slash + 1 : o->path);
    if (std::find(out.objects.begin(), out.objects.end(), name) == out.objects.end()) out.objects.push_back(name);
  }
  return out;
}

// The four classes of a classification, or {"scanned": false} when none ran; `scan` adds what the
// scan itself cost and `loaded` the blocks only poolscope's presence made (the program's view only).
void WriteReachability(report::JsonWriter& w, const track::ReachabilityResult* r, const ScanOutcome* scan,
                       const LoadedByPoolscope* loaded) {
  w.BeginObject();
  w.FieldBool("scanned", r != nullptr);
  if (r == nullptr) {
    if (scan != nullptr && !scan->scanned && scan->not_scanned_why != nullptr) {
      w.FieldStr("not_scanned_why", scan->not_scanned_why);
    }
    w.EndObject();
    return;
  }
  WriteTotal(w, "definitely_lost", r->definitely_lost);
  WriteTotal(w, "indirectly_lost", r->indirectly_lost);
  WriteTotal(w, "possibly_lost", r->possibly_lost);
  WriteTotal(w, "still_reachable", r->still_reachable);
  if (scan != nullptr) {
    w.Field("roots_bytes", scan->roots_bytes);
    w.Field("roots_read_bytes", scan->roots_read_bytes);
    w.Field("heap_bytes_scanned", r->heap_bytes_scanned);
    w.Field("unreadable_bytes", scan->unreadable_bytes);
    w.Field("scan_ms", scan->scan_ms);
    w.FieldInt("scan_threads", scan->parallel ? 2 : 1);
    w.FieldInt("threads_stopped", scan->threads_stopped);
    w.FieldInt("threads_not_stopped", scan->threads_not_stopped);
  }
  if (loaded != nullptr) {
    w.Key("loaded_by_poolscope");
    w.BeginObject();
    w.Field("blocks", loaded->total.blocks);
    w.Field("bytes", loaded->total.bytes);
    w.Key("objects");
    w.BeginArray();
    for (const std::string& name : loaded->objects) w.String(name.c_str());
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
}

// A frame as the source names it: what merges two return addresses into one frame of a group's key.
// Views of a symbolized frame's strings, which stay where they are while the symbolizer lives.
struct SourceFrame {
  std::string_view function, file;
  int line;
  bool operator==(const SourceFrame& o) const { return line == o.line && function == o.function && file == o.file; }
};
struct SourceFrameHash {
  size_t operator()(const SourceFrame& f) const {
    const std::hash<std::string_view> h;
    return h(f.function) ^ (h(f.file) * 0x9E3779B97F4A7C15ull) ^ static_cast<size_t>(f.line) * 0xC2B2AE3D27D4EB4Full;
  }
};

// The entry `same` accepts among those kept in `index` under `hash` and the keys after it (entries
// whose hashes collide go under the next free key), else `fresh`, kept there now; the entry either way.
template <typename Same>
uint32_t FindOrPut(track::KeyIndex* index, uint64_t hash, uint32_t fresh, Same&& same) {
  for (;; ++hash) {
    const uint32_t at = index->Get(hash);
    if (at == track::KeyIndex::kNone) {
      index->Put(hash, fresh);
      return fresh;
    }
    if (same(at)) return at;
  }
}

// A frame in one of the client library's entry points (see ProgramFrames).
bool IsClientEntry(const track::SymbolizedFrame& f) { return f.function.rfind("poolscope_", 0) == 0; }

}  // namespace

// The frames of a captured stack from the program's first one. The client library
// (//interpose:client) is linked into the program, so its entry points are not among the frames left
// out at capture (those are libpoolscope.so's): a stack that starts in one (poolscope_arena_alloc,
// when the compiler did not make its forwarding a tail call) starts at its caller.
int ProgramFrames(track::Symbolizer* sym, uint32_t stack_id, uintptr_t* pcs) {
  const int n = StackFrames(stack_id, pcs);
  int first = 0;
  while (first < n && IsClientEntry(sym->ReturnAddressFrame(pcs[first]))) ++first;
  if (first > 0) std::copy(pcs + first, pcs + n, pcs);
  return n - first;
}

namespace {

// The text a JsonWriter writes, gathered in a string.
class StringSink : public report::JsonSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}

 private:
  void Write(const char* s, size_t n) override { out_->append(s, n); }
  std::string* out_;
};

}  // namespace

const std::string& FrameTexts::Of(track::Symbolizer* sym, uintptr_t ra) {
  uint32_t at = index_.Get(ra);
  if (at != track::KeyIndex::kNone) return texts_[at];
  at = static_cast<uint32_t>(texts_.size());
  index_.Put(ra, at);
  texts_.emplace_back();
  std::string& text = texts_.back();
  const track::SymbolizedFrame& f = sym->ReturnAddressFrame(ra);
  StringSink sink(&text);
  report::JsonWriter w(&sink);
  w.BeginInlineObject();
  w.FieldHex("pc", ra);
  w.FieldStr("function", f.function);
  w.FieldStr("object", f.object);
  if (!f.file.empty()) {
    w.FieldStr("file", f.file);
    w.FieldInt("line", f.line);
  }
  w.EndObject();
  sink.Flush();
  if (!text.empty() && text.back() == '\n') text.pop_back();  // what a document's end adds
  return text;
}

void WriteStack(report::JsonWriter& w, track::Symbolizer* sym, FrameTexts* frames, uint32_t stack_id) {
  w.Key("stack");
  w.BeginArray();
  uintptr_t pcs[track::kMaxStackDepth];
  const int n = sym != nullptr ? ProgramFrames(sym, stack_id, pcs) : 0;
  for (int i = 0; i < n; ++i) {
    const std::string& text = frames->Of(sym, pcs[i]);
    w.Verbatim(text.data(), text.size());
  }
  w.EndArray();
}

// The pools each site's live blocks keep alive now: a pool counts once for every site with a live
// block in it (a pool shared by two sites pins for both). Sites with none are absent.
void GatherLeaks(ReportLeaks* r) {
  constexpr size_t kMaxStacks = 4096;
  constexpr size_t kMaxLeakGroups = 64;
  constexpr size_t kMaxSites = 32;
  constexpr size_t kMaxPinningSites = 8;
  const bool tracked = TrackingOn();
  std::vector<LeakGroup> raw;
  LiveTotals live = {};
  const ScanOutcome* scan = LastScan();
  const bool scanned = scan != nullptr && scan->scanned;
  // Per stack id, the pools its live blocks pin (a pool shared by sites counts for each).
  std::vector<uint64_t> pins;
  size_t nstacks_all =
      tracked ? AggregateLeaks(&raw, kMaxStacks, &live,
                               scanned ? +[](uintptr_t p) { return static_cast<uint8_t>(ScannedKind(p)); } : nullptr,
                               &pins)
              : 0;
  std::vector<SiteCounters> site_list(kMaxSites);
  site_list.resize(tracked ? TopSites(site_list.data(), kMaxSites) : 0);
  // The pools each site pinned at the peak of real live bytes: the last snapshot's, or this report's
  // own when it sees at least as many real live bytes as that snapshot did (or none was taken).
  std::vector<uint64_t> peak_pins;
  PeakPinning peak = {};
  const bool peak_known = tracked && g_pooling;
  bool peak_at_report = false;
  if (peak_known) {
    const int64_t real_now = static_cast<int64_t>(live.real_bytes + live.pools * PoolRealBytes());
    if (!TimelineReadPeak(&peak_pins, &peak) || real_now >= peak.real_live_bytes) {
      peak_at_report = true;
      peak_pins = pins;
      peak.t_ns = TimelineNowNs();
      peak.real_live_bytes = real_now;
    }
  }
  // Beside the busiest sites, those whose live blocks pin most pools, now and at the peak, wherever
  // they rank by calls.
  std::vector<uint64_t> pools_pinned, peak_pools_pinned;
  if (tracked) {
    for (const std::vector<uint64_t>* by : {&pins, &peak_pins}) {
      std::vector<std::pair<uint64_t, uint32_t>> by_pools;
      for (uint32_t id = 0; id < by->size(); ++id) {
        if ((*by)[id] != 0) by_pools.emplace_back((*by)[id], id);
      }
      std::sort(by_pools.begin(), by_pools.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (size_t i = 0; i < by_pools.size() && i < kMaxPinningSites; ++i) {
        const uint32_t id = by_pools[i].second;
        if (std::none_of(site_list.begin(), site_list.end(),
                         [id](const SiteCounters& c) { return c.stack_id == id; })) {
          site_list.push_back(SiteOf(id));
        }
      }
    }
    for (const SiteCounters& c : site_list) {
      pools_pinned.push_back(c.stack_id < pins.size() ? pins[c.stack_id] : 0);
      peak_pools_pinned.push_back(c.stack_id < peak_pins.size() ? peak_pins[c.stack_id] : 0);
    }
  }
  track::Symbolizer* sym = tracked ? new track::Symbolizer() : nullptr;
  // (The objects' paths from the maps the exit scan read, when it ran.)
  if (sym != nullptr && ScanMaps() != nullptr) sym->UseMaps(*ScanMaps());
  // Stacks that differ only in return addresses the source cannot tell apart (an unrolled loop calls
  // the same line from two places) are one group: merged by their symbolized frames. Each distinct
  // return address (`distinct`, each one's index found through `index`) is symbolized once, into the
  // part of the key it stands for.
  std::vector<uintptr_t> distinct;
  track::KeyIndex index;
  for (const LeakGroup& g : raw) {
    uintptr_t pcs[track::kMaxStackDepth];
    const int n = StackFrames(g.stack_id, pcs);
    for (int i = 0; i < n; ++i) {
      if (index.Get(pcs[i]) != track::KeyIndex::kNone) continue;
      index.Put(pcs[i], static_cast<uint32_t>(distinct.size()));
      distinct.push_back(pcs[i]);
    }
  }
  // Each distinct return address gets the number of its frame as the source names it (function, file,
  // line): the index of the first distinct address with that frame, found by the frame's hash (frames
  // whose hashes collide told apart by their text). A group's key is the numbers of its frames.
  std::vector<uint32_t> frame_id(distinct.size());
  std::vector<uint8_t> client_entry(distinct.size());
  {
    std::vector<const track::SymbolizedFrame*> frames(distinct.size());
    track::KeyIndex by_hash;
    by_hash.Reserve(distinct.size());
    for (size_t i = 0; i < distinct.size(); ++i) {
      const track::SymbolizedFrame& f = sym->ReturnAddressFrame(distinct[i]);
      frames[i] = &f;
      client_entry[i] = IsClientEntry(f);
      const SourceFrame source{f.function, f.file, f.line};
      frame_id[i] = FindOrPut(&by_hash, SourceFrameHash()(source), static_cast<uint32_t>(i), [&](uint32_t at) {
        return SourceFrame{frames[at]->function, frames[at]->file, frames[at]->line} == source;
      });
    }
  }
  // The groups in the order their first stack comes in `raw`; a key's group through the key's hash
  // (`group_of`, colliding keys told apart by their numbers), the keys one after another in `keys`.
  std::vector<LeakGroup> groups;
  std::vector<uint32_t> keys, key;
  std::vector<std::pair<size_t, size_t>> key_at;  // per group: where its key starts in `keys`, its length
  track::KeyIndex group_of;
  for (const LeakGroup& g : raw) {
    uintptr_t pcs[track::kMaxStackDepth];
    const int n = StackFrames(g.stack_id, pcs);
    int first = 0;
    while (first < n && client_entry[index.Get(pcs[first])]) ++first;  // as ProgramFrames
    key.clear();
    key.push_back(g.kind);
    // A stack of the client library's entry points alone is a group of its own (no frame's number is
    // kClientOnly).
    constexpr uint32_t kClientOnly = UINT32_MAX;
    if (first == n) key.insert(key.end(), {kClientOnly, g.stack_id});
    for (int i = first; i < n; ++i) key.push_back(frame_id[index.Get(pcs[i])]);
    uint64_t hash = 0;
    for (uint32_t v : key) hash = (hash ^ v) * 0x9E3779B97F4A7C15ull + (hash >> 29);
    const uint32_t fresh = static_cast<uint32_t>(groups.size());
    const uint32_t at = FindOrPut(&group_of, hash, fresh, [&](uint32_t at) {
      const auto [start, len] = key_at[at];
      return len == key.size() && std::equal(key.begin(), key.end(), keys.begin() + static_cast<ptrdiff_t>(start));
    });
    if (at == fresh) {
      key_at.emplace_back(keys.size(), key.size());
      keys.insert(keys.end(), key.begin(), key.end());
      groups.push_back(g);
    } else {
      LeakGroup& m = groups[at];
      m.blocks += g.blocks;
      m.bytes += g.bytes;
      m.pooled_blocks += g.pooled_blocks;
    }
  }
  // Definitely lost first, then indirectly and possibly lost, then still reachable; largest first
  // (equals in the order of their first stack).
  std::stable_sort(groups.begin(), groups.end(), [](const LeakGroup& a, const LeakGroup& b) {
    if (a.kind != b.kind) return a.kind > b.kind;
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.blocks > b.blocks;
  });
  r->tracked = tracked;
  r->scan = scan;
  r->scanned = scanned;
  r->live = live;
  r->nstacks_all = nstacks_all;
  r->ngroups_all = groups.size() + (nstacks_all - raw.size());
  r->ngroups = groups.size() < kMaxLeakGroups ? groups.size() : kMaxLeakGroups;
  r->raw = std::move(raw);
  r->sites = std::move(site_list);
  r->pools_pinned = std::move(pools_pinned);
  r->peak_pools_pinned = std::move(peak_pools_pinned);
  r->peak_known = peak_known;
  r->peak_at_report = peak_at_report;
  r->peak = peak;
  r->pool_real_bytes = PoolRealBytes();  // as the report counts a pool (report_render.cc)
  r->groups = std::move(groups);
  r->sym = sym;
}

void WriteSites(report::JsonWriter& w, const ReportLeaks& r) {
  // The dual ledger per allocation site: what the program asked for there, what the pools served,
  // and what reached the real allocator.
  w.Key("sites");
  w.BeginArray();
  for (size_t i = 0; i < r.sites.size(); ++i) {
    const SiteCounters& site = r.sites[i];
    const uint64_t pinned = i < r.pools_pinned.size() ? r.pools_pinned[i] : 0;
    w.BeginObject();
    w.Field("logical_allocs", site.allocs);
    w.Field("pool_hits", site.hits);
    w.Field("real_allocs", site.real_allocs);
    w.Field("bytes", site.bytes);
    w.Field("pools_pinned", pinned);
    w.Field("pinned_bytes", pinned * r.pool_real_bytes);
    const uint64_t peak_pinned = i < r.peak_pools_pinned.size() ? r.peak_pools_pinned[i] : 0;
    w.Field("peak_pools_pinned", peak_pinned);
    w.Field("peak_pinned_bytes", peak_pinned * r.pool_real_bytes);
    WriteStack(w, r.sym, &r.frames, site.stack_id);
    w.EndObject();
  }
  w.EndArray();
  // When the peak figures were taken (docs/report-schema.md); null without tracking or pooling.
  w.Key("pinning_peak");
  if (!r.peak_known) {
    w.Null();
    return;
  }
  w.BeginObject();
  w.Field("t_ms", r.peak.t_ns / 1000000);
  w.FieldInt("real_live_bytes", r.peak.real_live_bytes);
  w.FieldBool("at_report", r.peak_at_report);
  w.FieldIntOrNull("max_real_live_bytes_seen", r.peak.max_seen >= 0, r.peak.max_seen);
  w.Field("snapshots", r.peak.snapshots);
  w.Field("checks", r.peak.checks);
  w.EndObject();
}

void WriteLeaks(report::JsonWriter& w, const ReportLeaks& r) {
  // Live logical blocks, grouped by allocation stack, largest first.
  w.Key("leaks");
  w.BeginArray();
  for (size_t i = 0; i < r.ngroups; ++i) {
    w.BeginObject();
    w.Field("blocks", r.groups[i].blocks);
    w.Field("bytes", r.groups[i].bytes);
    w.Field("pooled_blocks", r.groups[i].pooled_blocks);
    w.Key("kind");
    if (r.scanned) {
      w.String(KindName(r.groups[i].kind));
    } else {
      w.Null();
    }
    WriteStack(w, r.sym, &r.frames, r.groups[i].stack_id);
    w.EndObject();
  }
  w.EndArray();
  w.Field("leak_groups_omitted", r.ngroups_all - r.ngroups);
  // Every live block is in `leaks` only when the table recorded every one (TrackingUnrecorded).
  w.FieldBool("tracked", r.tracked && TrackingUnrecorded() == 0);
  w.Key("reachability");
  const LoadedByPoolscope loaded = r.scanned ? CountLoadedByPoolscope(r.raw, r.sym) : LoadedByPoolscope();
  WriteReachability(w, r.scanned ? &r.scan->program : nullptr, r.scan, r.tracked ? &loaded : nullptr);
}

void WriteDetectorScan(report::JsonWriter& w, const ReportLeaks& r) {
  // What memcheck or LeakSanitizer below poolscope, with pooling on and no pool descriptions,
  // classifies at exit: the real blocks, poolscope's own memory scanned as any memory.
  w.Key("reachability");
  WriteReachability(w, r.scanned ? &r.scan->detector : nullptr, nullptr, nullptr);
  if (r.scanned) {
    WriteTotal(w, "hidden_in_pools", r.scan->hidden_in_pools);
    const track::ReachabilityResult& p = r.scan->program;
    const track::ReachabilityResult& d = r.scan->detector;
    const unsigned long long lost = p.definitely_lost.blocks + p.indirectly_lost.blocks;
    const unsigned long long hidden = r.scan->hidden_in_pools.blocks;
    char lsan_part[300] = "";
    if (r.scan->lsan_scanned) {
      snprintf(lsan_part, sizeof lsan_part,
               " LeakSanitizer below it would report %llu leaked (%llu direct, %llu indirect); %llu of the blocks it "
               "would report without poolscope sit in pools.",
               static_cast<unsigned long long>(r.scan->lsan_leaked.blocks),
               static_cast<unsigned long long>(r.scan->lsan_direct.blocks),
               static_cast<unsigned long long>(r.scan->lsan_indirect.blocks),
               static_cast<unsigned long long>(r.scan->lsan_hidden_in_pools.blocks));
    }
    char line[800];
    snprintf(line, sizeof line,
             "The program loses %llu block%s (%llu definitely, %llu indirectly); memcheck below poolscope "
             "would report %llu definitely, %llu indirectly and %llu possibly lost: %llu of the program's "
             "lost blocks sit in pools, where it cannot see them.%s",
             lost, lost == 1 ? "" : "s", static_cast<unsigned long long>(p.definitely_lost.blocks),
             static_cast<unsigned long long>(p.indirectly_lost.blocks),
             static_cast<unsigned long long>(d.definitely_lost.blocks),
             static_cast<unsigned long long>(d.indirectly_lost.blocks),
             static_cast<unsigned long long>(d.possibly_lost.blocks), hidden, lsan_part);
    w.FieldStr("reachability_verdict", line);
  }
  // What LeakSanitizer below poolscope reports at exit, by its own rules (leak_scan.h).
  w.Key("lsan");
  w.BeginObject();
  const bool lsan = r.scanned && r.scan->lsan_scanned;
  w.FieldBool("scanned", lsan);
  if (lsan) {
    WriteTotal(w, "leaked", r.scan->lsan_leaked);
    WriteTotal(w, "direct", r.scan->lsan_direct);
    WriteTotal(w, "indirect", r.scan->lsan_indirect);
    WriteTotal(w, "hidden_in_pools", r.scan->lsan_hidden_in_pools);
  } else if (r.scan != nullptr && r.scan->lsan_not_scanned_why != nullptr) {
    w.FieldStr("not_scanned_why", r.scan->lsan_not_scanned_why);
  }
  w.EndObject();
}

}  // namespace poolscope
