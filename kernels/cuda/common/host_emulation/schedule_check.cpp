// Checks the persistent tile schedules of kernels/cuda/hopper/tile_schedule.cuh on the host, at any
// grid (tests/test_wgmma_ws_nt.py builds it with g++ and feeds it the H200's grids):
//   schedule_check < cases      one case per line: raster group_m m_tiles n_tiles k_tiles units stream_k
// For each case it walks every unit's work as the kernel's producer does (StreamK::first / next,
// tile_of) and prints one line: "ok <steps> <adjacent>" (steps between consecutive schedule indices,
// and how many of them move to a neighbouring tile), or "error: ..." naming what went wrong: a tile
// mapped twice or outside the grid, a k-tile computed twice or never, a tile cut into more than two
// parts, or parts whose boundary does not match the units that hold them.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "hopper/tile_schedule.cuh"

namespace {

template <int Raster>
hopper::TileCoord coord(int t, int m, int n, int group_m) {
  if constexpr (Raster == 2) {
    return hopper::tile_of<2, 1>(t, m, n);
  } else {
    return hopper::grouped_tile(t, m, n, group_m, Raster == 1);
  }
}

std::string check(int raster, int group_m, int m, int n, int k, int units, int stream_k, long* adjacent) {
  const int tiles = m * n;
  std::vector<int> index_of(tiles, -1);  // tile (row-major) -> schedule index
  hopper::TileCoord prev{0, 0};
  for (int t = 0; t < tiles; ++t) {
    const hopper::TileCoord c = raster == 2 ? coord<2>(t, m, n, group_m)
                                : raster == 1 ? coord<1>(t, m, n, group_m) : coord<0>(t, m, n, group_m);
    if (c.m < 0 || c.m >= m || c.n < 0 || c.n >= n)
      return "error: index " + std::to_string(t) + " maps outside the grid (" + std::to_string(c.m) + ", " +
             std::to_string(c.n) + ")";
    int& seen = index_of[c.m * n + c.n];
    if (seen >= 0)
      return "error: tile (" + std::to_string(c.m) + ", " + std::to_string(c.n) + ") has indices " +
             std::to_string(seen) + " and " + std::to_string(t);
    seen = t;
    if (t > 0 && std::abs(c.m - prev.m) + std::abs(c.n - prev.n) == 1) ++*adjacent;
    prev = c;
  }
  // every k-tile of every tile once; parts per tile, and who holds them
  std::vector<std::vector<int>> covered(tiles, std::vector<int>(k, 0));
  std::map<int, std::vector<std::pair<int, int>>> parts;  // tile -> (part, boundary) of its split pieces
  for (int u = 0; u < units; ++u) {
    const hopper::StreamK s(tiles, k, units, u, stream_k != 0);
    int pieces = 0;
    for (hopper::WorkUnit w = s.first(); w.t >= 0; w = s.next(w)) {
      if (++pieces > tiles + 2) return "error: unit " + std::to_string(u) + " does not end";
      if (w.t >= tiles || w.kb < 0 || w.ke > k || w.kb >= w.ke)
        return "error: unit " + std::to_string(u) + " got tile " + std::to_string(w.t) + " k [" +
               std::to_string(w.kb) + ", " + std::to_string(w.ke) + ")";
      for (int kt = w.kb; kt < w.ke; ++kt) covered[w.t][kt] += 1;
      const int part = hopper::split_part(w, k);
      if (part >= 0) parts[w.t].push_back({part, hopper::split_boundary(w, k, u) - (part == 0 ? 1 : 0)});
    }
  }
  for (int t = 0; t < tiles; ++t)
    for (int kt = 0; kt < k; ++kt)
      if (covered[t][kt] != 1)
        return "error: k-tile " + std::to_string(kt) + " of index " + std::to_string(t) + " computed " +
               std::to_string(covered[t][kt]) + " times";
  for (const auto& [t, p] : parts) {
    // two parts, 0 and 1, held by neighbouring units: part 0's boundary names the unit after it
    if (p.size() != 2 || p[0].first + p[1].first != 1)
      return "error: index " + std::to_string(t) + " is cut into " + std::to_string(p.size()) + " parts";
    const int unit0 = p[0].first == 0 ? p[0].second : p[1].second;
    const int unit1 = p[0].first == 1 ? p[0].second : p[1].second;
    if (unit1 != unit0 + 1)
      return "error: index " + std::to_string(t) + " has parts in units " + std::to_string(unit0) + " and " +
             std::to_string(unit1);
  }
  return "ok";
}

}  // namespace

int main() {
  int raster, group_m, m, n, k, units, stream_k;
  while (std::scanf("%d %d %d %d %d %d %d", &raster, &group_m, &m, &n, &k, &units, &stream_k) == 7) {
    long adjacent = 0;
    const std::string r = check(raster, group_m, m, n, k, units, stream_k, &adjacent);
    if (r == "ok")
      std::printf("ok %d %ld\n", m * n - 1, adjacent);
    else
      std::printf("%s\n", r.c_str());
  }
  return 0;
}
