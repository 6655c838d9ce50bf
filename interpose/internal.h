// File: interpose/internal.h
//
// poolscope's own memory and locks. Memory comes from mmap, never from the program's allocator, so it
// never shows up in either ledger nor in a leak detector below us (the report's `internal` section
// counts it). SpinLock (track/spin_lock.h) is for slow paths only (thread registry, metadata free lists, report writing).
#ifndef POOLSCOPE_INTERPOSE_INTERNAL_H_
#define POOLSCOPE_INTERPOSE_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "track/spin_lock.h"

namespace poolscope {

// The spin lock of track/ (pause, then yield), for slow paths only.
using SpinLock = track::SpinLock;
using SpinLockHolder = track::SpinLockHolder;

// Zeroed memory from mmap, in power-of-two size classes of 64 B .. kInternalListedMax kept on free
// lists; larger requests are mapped and unmapped directly. Thread-safe.
constexpr size_t kInternalListedMax = size_t{64} << 10;
void* InternalAlloc(size_t bytes);
void InternalFree(void* p, size_t bytes);
// Reserves address space (MAP_NORESERVE) that is never returned. `noted`: the caller tells, with
// InternalNoteUsed, how far it has written into it (from its start) before it writes further; until
// then none of it counts as used. `pointer_free`: it will never hold a pointer into the program's heap
// (stack records, hidden block addresses, counters), so a detector below poolscope finds nothing in it
// and the scan's prediction of that detector need not read it (InternalMappings says which).
void* InternalReserve(size_t bytes, bool noted = false, bool pointer_free = false);
// A reservation made `noted` is written below `used_end` only (a later note may move it on, never
// back): its pages past that are neither read by the scan as poolscope's memory nor counted resident.
void InternalNoteUsed(const void* reservation, uintptr_t used_end);
// A zeroed mapping of its own, listed as poolscope's, made pointer_free as InternalReserve makes a
// reservation; InternalUnmap gives it back.
void* InternalMap(size_t bytes, bool pointer_free);
void InternalUnmap(void* p, size_t bytes);
// Grows or shrinks a direct mapping made by InternalAlloc (> 64 KiB); may move it.
void* InternalRealloc(void* p, size_t old_bytes, size_t new_bytes);

// Copies up to `max` of the mappings made here that are still mapped into begin[]/end[], where the
// part of each ever written ends into used[] (InternalNoteUsed; the mapping's end unless noted), and
// whether it was made pointer_free into pointer_free[] (1 or 0), and returns how many there are in all
// (a return above `max`: call again with more room). What the reachability scan leaves out of the
// program's roots (poolscope's own memory holds pointers to the program's blocks and must not make
// them reachable), and reads, up to used[] and but for the pointer-free ones, as a detector below
// poolscope would.
size_t InternalMappings(uintptr_t* begin, uintptr_t* end, uintptr_t* used, uint8_t* pointer_free, size_t max);
// Whether p lies in one of those mappings.
bool InternalContains(const void* p);

// fork() handlers for the internal locks.
void InternalForkPrepare();
void InternalForkParent();
void InternalForkChild();

struct InternalCounters;
void InternalSnapshot(InternalCounters* out);

// Reads /proc/self/status into buf without allocating: at most size - 1 bytes, NUL-terminated. False
// (buf unset) when it cannot be opened.
bool ReadSelfStatus(char* buf, size_t size);

// Writes to stderr without allocating. Lines are written whole with one write(2).
void RawWrite(int fd, const char* s, size_t n);
void RawLine(const char* line);  // "poolscope: " is not added; a newline is

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_INTERNAL_H_
