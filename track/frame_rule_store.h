// File: track/frame_rule_store.h
//
// Frame rules kept on disk from one process to the next. Every process of a build unwinds through the
// same objects (each compiler job through the same cc1, the same libc) and would compute the same rules
// again (frame_rules.h: an FDE search and a CFI interpretation per function). At exit a process writes
// the rules it holds for each object that was loaded when it started to one file per object, named by
// the object's GNU build id; the next process that unwinds through that object reads them from there.
// A rule is a function of the object's bytes alone, which its build id names; an object without one is
// left out.
//
// A file: a header (magic, slot bits, count, checksum) and 2^bits slots (key, rule) of an open-
// addressing table keyed by the pc's offset in its object, each word with its top bit set, so that no
// word of it looks like an address to a leak checker scanning the mapping. A file that is short, has
// another magic, or does not match its checksum is not read. Files are written whole under a temporary
// name and renamed into place: a reader maps either the old table or the new one.
//
// Lookups take no lock and make no allocation; an object's file is mapped by the first lookup of a pc
// in that object. When code has been unmapped (InvalidateFrameRules), the store's objects that are no
// longer loaded answer nothing and are not written: another object may now be where one of them was.
#ifndef POOLSCOPE_TRACK_FRAME_RULE_STORE_H_
#define POOLSCOPE_TRACK_FRAME_RULE_STORE_H_

#include <cstddef>
#include <cstdint>

#include "track/frame_rules.h"

namespace poolscope {
namespace track {

// Opens the store in directory `dir` for the objects loaded now (dl_iterate_phdr: call it at start-up,
// not inside an allocation). The directory is made when the first file is written. nullptr or "": none.
void OpenFrameRuleStore(const char* dir);

// The stored rule at pc (an address inside an instruction, as LookupFrameRule takes it), or 0.
FrameRule StoredFrameRule(uintptr_t pc);
// A rule at pc was computed (the store had none): counted for its object, whose file SaveFrameRuleStore
// rewrites only when enough were.
void NoteComputedFrameRule(uintptr_t pc);

// Code was unmapped (dlclose): the store's objects that are no longer loaded are dropped (calls
// dl_iterate_phdr: not inside an allocation).
void RecheckFrameRuleStore();

// At exit: for each object of the store, when the rules cached in this process that its file lacks are
// at least one, and one for each 512 it holds, writes a new file with both. Returns how many it wrote.
int SaveFrameRuleStore();

// Rules the store answered in this process, and files it read, for the report and tests.
uint64_t FrameRulesFromStore();
int FrameRuleFilesRead();

namespace frame_rule_store_internal {
// Unmaps every file and forgets the objects and counts, as a new process would start (tests).
void ResetForTest();
}  // namespace frame_rule_store_internal

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_FRAME_RULE_STORE_H_
