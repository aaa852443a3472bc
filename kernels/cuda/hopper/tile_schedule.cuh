// Persistent tile schedules: which output tile a persistent CTA (or cluster) computes next, in what
// order the tiles are walked, and with stream-K, which range of a tile's k-tiles it takes. Used by
// stage 12 (12_wgmma_ws.cu). Integer code only, so that it compiles for the device and, unchanged,
// on the host, where tests/test_wgmma_ws_nt.py checks every order and split on the H200's
// grids (common/host_emulation/schedule_check.cpp): every tile exactly once, every k-tile of every
// tile exactly once, and at most two parts per stream-K tile.
//
// Tiles are counted on a grid of m_tiles x n_tiles (stage 12: cluster rows x BN-wide columns); a
// schedule index t in [0, m_tiles * n_tiles) maps to one tile. Order (RASTER):
//   0  grouped raster: groups of GroupM tile rows, each walked column by column, down each column;
//      the tiles in flight at once (one per work unit) share their A rows and B columns in L2.
//   1  grouped serpentine: as 0, but every odd group walks its columns right to left, so the first
//      tiles of a group use the B columns the last tiles of the group before it used.
//   2  generalized Hilbert curve over the whole grid (Cerveny's "gilbert" construction for any
//      rectangle): any run of consecutive indices is a compact region, at every scale, so tiles in
//      flight at once and the ones after them overlap in rows or columns at group and wave edges.
#pragma once

#ifndef __CUDACC__
#ifndef __device__
#define __device__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#endif

namespace hopper {

struct TileCoord {
  int m;  // tile row
  int n;  // tile column
};

__device__ __forceinline__ int sched_abs(int x) { return x < 0 ? -x : x; }
__device__ __forceinline__ int sched_sign(int x) { return (x > 0) - (x < 0); }

// Groups of group_m tile rows (the last group may be shorter), each walked down its columns (stages 13 and 15's order,
// RASTER 0's)
__device__ __forceinline__ TileCoord grouped_raster(int t, int m_tiles, int n_tiles, int group_m) {
  const int group_tiles = group_m * n_tiles;
  const int group = t / group_tiles;
  const int first_m = group * group_m;
  const int rows = m_tiles - first_m < group_m ? m_tiles - first_m : group_m;
  const int local = t - group * group_tiles;
  return {first_m + local % rows, local / rows};
}

// The same; serpentine: odd groups walk the columns from the right.
__device__ __forceinline__ TileCoord grouped_tile(int t, int m_tiles, int n_tiles, int group_m, bool serpentine) {
  const TileCoord c = grouped_raster(t, m_tiles, n_tiles, group_m);
  return {c.m, serpentine && ((t / (group_m * n_tiles)) & 1) ? n_tiles - 1 - c.n : c.n};
}

// The idx-th cell of a generalized Hilbert curve through a w x h grid (x < w, y < h). The curve
// follows the longer side; a region is cut in two along its major axis a when it is long (2|a| >
// 3|b|), else in three (half of b, the whole of a, back along the other half of b, the halves made
// even where they can be so that the pieces join), and the walk descends into the piece holding
// idx. Every cut halves a side, so about log2(w) + log2(h) steps. Both axes stay parallel to the
// grid's, so a region is its corner, which grid axis a runs along, and the signed lengths of a and
// b: six live values, small enough for stage 12's 40-register producer thread.
__device__ __forceinline__ TileCoord hilbert_cell(int idx, int w, int h) {
  int x = 0, y = 0;
  bool a_along_x = w >= h;  // the major axis a runs along x (b along y), or the other way round
  int a = a_along_x ? w : h, b = a_along_x ? h : w;  // signed lengths along a and along b
  while (true) {
    const int la = sched_abs(a), lb = sched_abs(b), sa = sched_sign(a), sb = sched_sign(b);
    // move the corner by da along a and db along b
    auto move = [&](int da, int db) {
      x += a_along_x ? da : db;
      y += a_along_x ? db : da;
    };
    if (lb == 1) {  // a single row along a
      move(sa * idx, 0);
      return {x, y};
    }
    if (la == 1) {  // a single row along b
      move(0, sb * idx);
      return {x, y};
    }
    int ha = a >> 1, hb = b >> 1;  // floored halves
    if (2 * la > 3 * lb) {  // long region: two halves along a
      if ((sched_abs(ha) & 1) && la > 2) ha += sa;
      const int first = sched_abs(ha * b);
      if (idx < first) {
        a = ha;
      } else {
        idx -= first;
        move(ha, 0);
        a -= ha;
      }
      continue;
    }
    if ((sched_abs(hb) & 1) && lb > 2) hb += sb;
    const int first = sched_abs(hb * ha);  // up half of b, along half of a: the axes swap
    if (idx < first) {
      a_along_x = !a_along_x;
      b = ha;
      a = hb;
      continue;
    }
    idx -= first;
    const int second = sched_abs(a * (b - hb));  // the whole of a, the rest of b
    if (idx < second) {
      move(0, hb);
      b -= hb;
      continue;
    }
    idx -= second;  // back down the other half of b, the axes swapped and reversed
    move(a - sa, hb - sb);
    a_along_x = !a_along_x;
    const int na = -hb, nb = -(a - ha);
    a = na;
    b = nb;
  }
}

template <int Raster, int GroupM>
__device__ __forceinline__ TileCoord tile_of(int t, int m_tiles, int n_tiles) {
  static_assert(Raster >= 0 && Raster <= 2, "RASTER is 0 (grouped), 1 (grouped serpentine) or 2 (Hilbert)");
  if constexpr (Raster == 2) {
    const TileCoord c = hilbert_cell(t, n_tiles, m_tiles);  // x: column, y: row
    return {c.n, c.m};
  } else {
    return grouped_tile(t, m_tiles, n_tiles, GroupM, Raster == 1);
  }
}

// One piece of work of a persistent unit (a CTA, or a cluster): k-tiles [kb, ke) of schedule tile t;
// t < 0: no more work.
struct WorkUnit {
  int t, kb, ke;
};

// The work of unit `unit` of `units`. Data-parallel: tiles t = unit, unit + units, ... whole. With
// stream-K (a hybrid, as CUTLASS's stream-K scheduler): when the tiles leave the last wave partly
// idle (tiles % units != 0) and there is at least one whole wave, the last whole wave and the
// partial one (units + tiles % units tiles, in schedule order) are cut into `units` equal contiguous
// runs of k-tiles, one per unit, after the unit's data-parallel tiles. Every run is at least one
// tile long, so a tile is cut at most once: into a first part [0, x), the end of unit b - 1's run,
// and a second part [x, k_tiles), the start of unit b's run (b: the cut's "boundary").
struct StreamK {
  int k_tiles, units, unit;
  int dp_tiles;          // tiles [0, dp_tiles) are whole and data-parallel
  int sk_begin, sk_end;  // this unit's run of the stream-K region's k-tiles (tile-major)

  __device__ __forceinline__ StreamK(int tiles, int k_tiles_, int units_, int unit_, bool stream_k)
      : k_tiles(k_tiles_), units(units_), unit(unit_), dp_tiles(tiles), sk_begin(0), sk_end(0) {
    const int waves = tiles / units, rem = tiles % units;
    if (stream_k && waves >= 1 && rem > 0) {
      dp_tiles = (waves - 1) * units;
      const long long iters = static_cast<long long>(tiles - dp_tiles) * k_tiles;
      sk_begin = static_cast<int>(iters * unit / units);
      sk_end = static_cast<int>(iters * (unit + 1) / units);
    }
  }
  __device__ __forceinline__ WorkUnit at(int pos) const {  // the stream-K piece that begins at pos
    if (pos >= sk_end) return {-1, 0, 0};
    const int t = pos / k_tiles, kb = pos - t * k_tiles;
    return {dp_tiles + t, kb, kb + (sk_end - pos) < k_tiles ? kb + (sk_end - pos) : k_tiles};
  }
  __device__ __forceinline__ WorkUnit first() const {
    return unit < dp_tiles ? WorkUnit{unit, 0, k_tiles} : at(sk_begin);
  }
  __device__ __forceinline__ WorkUnit next(const WorkUnit& u) const {
    if (u.t < dp_tiles) return u.t + units < dp_tiles ? WorkUnit{u.t + units, 0, k_tiles} : at(sk_begin);
    return at((u.t - dp_tiles) * k_tiles + u.ke);
  }
};

// A piece that is not a whole tile: which part (0: [0, x), 1: [x, k_tiles)) and the boundary between
// the two units that share the tile (the second part's unit). -1: a whole tile.
__device__ __forceinline__ int split_part(const WorkUnit& u, int k_tiles) {
  return u.kb == 0 && u.ke == k_tiles ? -1 : (u.kb == 0 ? 0 : 1);
}
__device__ __forceinline__ int split_boundary(const WorkUnit& u, int k_tiles, int unit) {
  return split_part(u, k_tiles) == 1 ? unit : unit + 1;
}

}  // namespace hopper
