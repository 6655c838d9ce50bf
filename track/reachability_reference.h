// File: track/reachability_reference.h
//
// The tests' reference for track/reachability.h: memcheck's rules stated as fixed points over an
// explicit graph of the blocks' words and computed the slow way. For tests only.
#ifndef POOLSCOPE_TRACK_REACHABILITY_REFERENCE_H_
#define POOLSCOPE_TRACK_REACHABILITY_REFERENCE_H_

#include <string.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "track/reachability.h"

namespace poolscope {
namespace track {

// The reference: the same rules, stated as fixed points over an explicit graph and computed the slow
// way (linear lookups, iteration until nothing changes).
struct Reference {
  struct Edge {
    size_t to;
    bool start;
  };
  std::vector<ScanBlock> blocks;  // sorted by start
  std::vector<std::vector<Edge>> out;
  std::vector<Edge> root_out;
  std::vector<LeakKind> kind;
  std::vector<uint64_t> ind_blocks, ind_bytes;

  long Into(uint64_t v) const {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const ScanBlock& b = blocks[i];
      if ((v >= b.start && v < b.start + b.size()) || (b.size() == 0 && v == b.start)) return long(i);
    }
    return -1;
  }
  void Words(uintptr_t begin, uintptr_t end, std::vector<Edge>* edges) const {
    for (uintptr_t a = begin; a + 8 <= end; ++a) {
      if (a % 8 != 0) continue;
      uint64_t v;
      memcpy(&v, reinterpret_cast<const void*>(a), 8);
      long i = Into(v);
      if (i >= 0) edges->push_back({size_t(i), v == blocks[i].start});
    }
  }

  Reference(std::vector<ScanBlock> in, const std::vector<RootRange>& roots) : blocks(std::move(in)) {
    std::sort(blocks.begin(), blocks.end(),
              [](const ScanBlock& a, const ScanBlock& b) { return a.start < b.start; });
    size_t n = blocks.size();
    out.resize(n);
    for (size_t i = 0; i < n; ++i) Words(blocks[i].start, blocks[i].start + blocks[i].size(), &out[i]);
    for (const RootRange& r : roots) Words(r.begin, r.end, &root_out);
    // Reachable: the least set closed under start edges from roots and from its members.
    std::vector<bool> reach(n, false), poss(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      auto take = [&](const std::vector<Edge>& edges) {
        for (const Edge& e : edges) {
          if (e.start && !reach[e.to]) reach[e.to] = changed = true;
        }
      };
      take(root_out);
      for (size_t i = 0; i < n; ++i) {
        if (reach[i]) take(out[i]);
      }
    }
    // Possible: anything else reached by any edge from roots, reachable or possible blocks.
    for (bool changed = true; changed;) {
      changed = false;
      auto take = [&](const std::vector<Edge>& edges) {
        for (const Edge& e : edges) {
          if (!reach[e.to] && !poss[e.to]) poss[e.to] = changed = true;
        }
      };
      take(root_out);
      for (size_t i = 0; i < n; ++i) {
        if (reach[i] || poss[i]) take(out[i]);
      }
    }
    // Cliques, leaders in address order.
    std::vector<bool> indirect(n, false);
    ind_blocks.assign(n, 0);
    ind_bytes.assign(n, 0);
    for (size_t l = 0; l < n; ++l) {
      if (reach[l] || poss[l] || indirect[l]) continue;
      std::vector<bool> in(n, false);
      for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < n; ++i) {
          if (i != l && !in[i]) continue;
          for (const Edge& e : out[i]) {
            size_t t = e.to;
            if (t == l || in[t] || reach[t] || poss[t] || indirect[t]) continue;
            in[t] = changed = true;
          }
        }
      }
      for (size_t t = 0; t < n; ++t) {
        if (!in[t]) continue;
        indirect[t] = true;
        ind_blocks[l] += 1 + ind_blocks[t];
        ind_bytes[l] += blocks[t].size() + ind_bytes[t];
        ind_blocks[t] = ind_bytes[t] = 0;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      kind.push_back(reach[i]      ? LeakKind::kStillReachable
                     : poss[i]     ? LeakKind::kPossiblyLost
                     : indirect[i] ? LeakKind::kIndirectlyLost
                                   : LeakKind::kDefinitelyLost);
    }
  }
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_REACHABILITY_REFERENCE_H_
