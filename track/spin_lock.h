// File: track/spin_lock.h
//
// A test-and-test-and-set spin lock for track/'s short critical sections (a stripe of LiveTable, the
// record allocator of StackDepot). One atomic exchange when uncontended; it yields the CPU while it
// waits, so a holder that was preempted is not starved. It allocates nothing and takes no other lock.
// It does not know its owner: Unlock from a fork() child (whose one thread held it at fork) is fine.
#ifndef POOLSCOPE_TRACK_SPIN_LOCK_H_
#define POOLSCOPE_TRACK_SPIN_LOCK_H_

#include <sched.h>

#include <atomic>

namespace poolscope {
namespace track {

class SpinLock {
 public:
  void Lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      int spins = 0;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          sched_yield();
          spins = 0;
        } else {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
      }
    }
  }
  // Takes the lock only if it is free now.
  bool TryLock() {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void Unlock() { locked_.store(false, std::memory_order_release); }
  // fork() child: the lock may have been held by a thread that no longer exists.
  void Reset() { locked_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> locked_{false};
};

class SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* l) : l_(l) { l_->Lock(); }
  ~SpinLockHolder() { l_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* l_;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_SPIN_LOCK_H_
