// The consumers' issue-path defines of the wgmma stages (12, 13 and 15; stage 15's header has what they measured):
// what stands between a warpgroup's wait and its next wgmma issue.
//   UNIFORM_A  1: the consumer warpgroup's index read through a shuffle from lane 0 (hopper::warp_uniform), so
//              ptxas knows it warp-uniform and computes A's wgmma descriptors in uniform registers (no R2UR
//              between the wgmmas); 0: as derived from the thread index
//   DESC_STEP  1: a k-tile's k-steps take its first step's descriptors advanced by the step's bytes
//              (hopper::desc_advance, CUTLASS's descriptor iterator); 0: each step's built from its address.
//              Stage 15's 2 also builds the next k-block's under this one's wgmmas
// Each stage checks the values it takes.
#pragma once
#ifndef UNIFORM_A
#define UNIFORM_A 0
#endif
#ifndef DESC_STEP
#define DESC_STEP 0
#endif
