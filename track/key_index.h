// File: track/key_index.h
//
// KeyIndex: 64-bit keys (addresses, offsets) to 32-bit values, for tables built once and read many
// times: open addressing with linear probing, kept at most half full, doubled as it fills. A key is
// placed by the high half of its product with a 64-bit odd constant (Fibonacci hashing), so keys that
// differ only in their low bits, as neighbouring addresses do, spread.
#ifndef POOLSCOPE_TRACK_KEY_INDEX_H_
#define POOLSCOPE_TRACK_KEY_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace poolscope {
namespace track {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // key's value, or kNone.
  uint32_t Get(uint64_t key) const {
    if (used_ == 0) return kNone;
    return values_[Slot(key)];
  }
  // Sets key's value (not kNone).
  void Put(uint64_t key, uint32_t value) {
    if (2 * (used_ + 1) > values_.size()) Grow(values_.empty() ? kFirstSlots : 2 * values_.size());
    const size_t i = Slot(key);
    if (values_[i] == kNone) {
      ++used_;
      keys_[i] = key;
    }
    values_[i] = value;
  }
  size_t size() const { return used_; }
  size_t capacity() const { return values_.size() / 2; }  // keys it holds before it grows
  // Room for n keys in all without growing (a table whose size is known before it is filled).
  void Reserve(size_t n) {
    size_t slots = values_.empty() ? kFirstSlots : values_.size();
    while (2 * n > slots) slots *= 2;
    if (slots != values_.size()) Grow(slots);
  }

 private:
  static constexpr size_t kFirstSlots = 1024;
  // The slot that holds key, or the empty one where it goes.
  size_t Slot(uint64_t key) const {
    const size_t mask = values_.size() - 1;
    size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (values_[i] != kNone && keys_[i] != key) i = (i + 1) & mask;
    return i;
  }
  // Places every key again in `slots` slots (a power of two, at least twice the keys).
  void Grow(size_t slots) {
    std::vector<uint64_t> old_keys;
    std::vector<uint32_t> old_values;
    old_keys.swap(keys_);
    old_values.swap(values_);
    keys_.assign(slots, 0);
    values_.assign(keys_.size(), kNone);
    for (size_t i = 0; i < old_values.size(); ++i) {
      if (old_values[i] == kNone) continue;
      const size_t j = Slot(old_keys[i]);
      keys_[j] = old_keys[i];
      values_[j] = old_values[i];
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_;
  size_t used_ = 0;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_KEY_INDEX_H_
