// What a role of a persistent CTA walks, with or without 2-CTA clusters along M (stages 13 and 15): schedule indices
// first, first + stride, ... (the cluster's among all clusters; without clusters the CTA's among the grid), each a
// tile of the grouped raster (tile_schedule.cuh's grouped_raster, RASTER 0's order) over cluster tiles, CLUSTER_M vertically adjacent tiles
// each: the CTA of rank r takes the r-th, which may lie wholly past M (it loads zeros, stores nothing and keeps the
// ring's protocol). Read by each role where its walk begins (after setmaxnreg).
#pragma once

#include "ptx.cuh"
#include "tile_schedule.cuh"

namespace hopper {

struct ClusterWalk {
  int rank, first, stride;
};

template <int ClusterM>
__device__ __forceinline__ ClusterWalk cluster_walk() {
  if constexpr (ClusterM > 1) {
    return {static_cast<int>(cluster_cta_rank()), static_cast<int>(cluster_id_x()), static_cast<int>(cluster_count_x())};
  } else {
    return {0, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x)};
  }
}

// This CTA's tile at schedule index t: m_rows rows of cluster tiles (cdiv(M, BM x ClusterM)), groups of GroupM of them
template <int ClusterM, int GroupM>
__device__ __forceinline__ TileCoord cta_tile(int t, int m_rows, int n_tiles, int cta_rank) {
  const TileCoord c = grouped_raster(t, m_rows, n_tiles, GroupM);
  return {c.m * ClusterM + cta_rank, c.n};
}

}  // namespace hopper
