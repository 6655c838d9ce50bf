// File: track/stack_capture_test_chain.h
//
// ChainA -> ChainB -> ChainC -> ChainD -> CaptureStack, each noinline and built with -O2
// -fomit-frame-pointer (see BUILD), for the stack capture tests.
#ifndef POOLSCOPE_TRACK_STACK_CAPTURE_TEST_CHAIN_H_
#define POOLSCOPE_TRACK_STACK_CAPTURE_TEST_CHAIN_H_

#include <cstdint>

namespace poolscope {
namespace track {
namespace testchain {

int ChainA(uintptr_t* pcs, int max_depth, int skip);
int ChainB(uintptr_t* pcs, int max_depth, int skip);
int ChainC(uintptr_t* pcs, int max_depth, int skip);
int ChainD(uintptr_t* pcs, int max_depth, int skip);

}  // namespace testchain
}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_CAPTURE_TEST_CHAIN_H_
