// File: pool/pool_model_test.cc
//
// One thread's implicit arena under long random runs of carves and frees, in the two ways the shim
// drives it: untracked (Carve names the block last; Free takes the LIFO path when it can) and tracked
// (no block named last; FreeOwnTracked first, which steps the carve point back over tail blocks). Each
// live block is filled with its own byte, so any overlap between live blocks, or a carve that hands out
// bytes not zeroed, shows when the block is checked. After every step: each live block's usable size
// is at least what was asked and ends before the next live block starts; a free of a block already
// freed (and not carved over since) or of an interior pointer is refused and changes nothing.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pool/fake_backend.h"
#include "pool/pool.h"
#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {
namespace {

struct Live {
  char* p;
  size_t n;
  unsigned char fill;
};

class Model {
 public:
  Model(const Config& config, bool tracked, uint64_t seed)
      : t_(config), tc_(&t_.domain), tracked_(tracked), rng_(seed) {
    pool_size_ = config.pool_size;
  }
  ~Model() { tc_.Shutdown(); }

  void Run(int steps) {
    for (int step = 0; step < steps && !::testing::Test::HasFatalFailure(); ++step) {
      const unsigned op = rng_() % 8;
      if ((op < 4 && live_.size() < kMaxLive) || live_.empty()) {
        CarveOne();
      } else if (op < 7) {
        FreeOne();
      } else {
        BadFree();
      }
      CheckLayout(step);
    }
    while (!live_.empty() && !::testing::Test::HasFatalFailure()) FreeOne();
  }

 private:
  // Enough live blocks to fill several pools and keep some retired.
  static constexpr size_t kMaxLive = 48;

  void CarveOne() {
    // Mostly small sizes, as programs ask; sometimes up to the whole pool.
    size_t n = rng_() % 4 == 0 ? 1 + rng_() % pool_size_ : 1 + rng_() % std::min<size_t>(pool_size_, 48);
    char* p = static_cast<char*>(tc_.Carve(n));
    ASSERT_NE(p, nullptr);
    if (tracked_) tc_.ForgetLast();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 0) << "byte " << i << " of a fresh block of " << n;
    const unsigned char fill = static_cast<unsigned char>(1 + (next_fill_++ % 254));
    memset(p, fill, n);
    // Whatever was freed at p before is live again now.
    freed_.erase(std::remove(freed_.begin(), freed_.end(), p), freed_.end());
    live_.push_back({p, n, fill});
  }

  void FreeOne() {
    // Mostly the newest block (LIFO, as temporaries go), else any.
    size_t i = rng_() % 2 == 0 ? live_.size() - 1 : rng_() % live_.size();
    Live b = live_[i];
    for (size_t k = 0; k < b.n; ++k)
      ASSERT_EQ(static_cast<unsigned char>(b.p[k]), b.fill) << "a live block was overwritten";
    PoolHeader* h = t_.domain.Find(b.p);
    ASSERT_NE(h, nullptr);
    bool freed = false;
    if (tracked_) {
      uint64_t nfreed = 0, nreset = 0;
      freed = tc_.FreeOwnTracked(h, b.p, &nfreed, &nreset);
    }
    if (!freed) {
      ASSERT_EQ(tc_.Free(h, b.p), Domain::FreeResult::kFreed) << (tracked_ ? "tracked" : "untracked");
    }
    live_.erase(live_.begin() + static_cast<ptrdiff_t>(i));
    if (freed_.size() == kMaxLive) freed_.erase(freed_.begin());
    freed_.push_back(b.p);
  }

  // A double free of a block not carved over since, or a free inside a live block: refused.
  void BadFree() {
    char* p = nullptr;
    if (!freed_.empty() && rng_() % 2 == 0) {
      p = freed_[rng_() % freed_.size()];
      for (const Live& b : live_) {
        if (p > b.p && p < b.p + b.n) return;  // carved over: now inside a live block, tried below
      }
    } else {
      const Live& b = live_[rng_() % live_.size()];
      if (b.n <= 8) return;
      p = b.p + 8 * (1 + rng_() % ((b.n - 1) / 8));
    }
    PoolHeader* h = t_.domain.Find(p);
    if (h == nullptr) return;  // its pool was released
    const uint64_t errors = tc_.stats().double_frees + tc_.stats().invalid_frees;
    if (tracked_) {
      uint64_t nfreed = 0, nreset = 0;
      ASSERT_FALSE(tc_.FreeOwnTracked(h, p, &nfreed, &nreset)) << "a bad free taken as a free";
    }
    ASSERT_NE(tc_.Free(h, p), Domain::FreeResult::kFreed) << "a bad free taken as a free";
    ASSERT_EQ(tc_.stats().double_frees + tc_.stats().invalid_frees, errors + 1);
  }

  void CheckLayout(int step) {
    std::vector<Live> sorted = live_;
    std::sort(sorted.begin(), sorted.end(), [](const Live& a, const Live& b) { return a.p < b.p; });
    for (size_t i = 0; i < sorted.size(); ++i) {
      const Live& b = sorted[i];
      const size_t usable = t_.domain.UsableSize(t_.domain.Find(b.p), b.p);
      ASSERT_GE(usable, b.n) << "step " << step << ": block of " << b.n << " bytes";
      if (i + 1 < sorted.size() && t_.domain.Find(sorted[i + 1].p) == t_.domain.Find(b.p)) {
        ASSERT_LE(b.p + usable, sorted[i + 1].p)
            << "step " << step << ": usable size runs into the next block";
      }
    }
  }

  TestDomain t_;
  ThreadCache tc_;
  bool tracked_;
  std::mt19937_64 rng_;
  size_t pool_size_;
  unsigned next_fill_ = 0;
  std::vector<Live> live_;
  std::vector<char*> freed_;
};

Config ModelConfig(size_t pool_size, bool align8) {
  Config c;
  c.pool_size = pool_size;
  c.max_cached = 4;
  c.align8 = align8;
  return c;
}

TEST(PoolModelTest, TrackedCarvesAndFrees) {
  for (size_t pool_size : {64, 128, 256, 4096}) {
    for (bool align8 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "pool_size " << pool_size << " align8 " << align8);
      Model(ModelConfig(pool_size, align8), true, pool_size + align8).Run(20000);
    }
  }
}

TEST(PoolModelTest, UntrackedCarvesAndFrees) {
  for (size_t pool_size : {64, 128, 256, 4096}) {
    for (bool align8 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "pool_size " << pool_size << " align8 " << align8);
      Model(ModelConfig(pool_size, align8), false, pool_size + align8).Run(20000);
    }
  }
}

}  // namespace
}  // namespace pool
}  // namespace poolscope
