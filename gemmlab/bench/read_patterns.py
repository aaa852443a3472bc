"""How fast can a decode GEMM's weights be read? HBM read bandwidth of the access patterns a
decode kernel can use, without any arithmetic (issue 30).

Stage 14 (decode_splitk) streams a weight matrix at 53-67% of the copy probe's bandwidth at
M = 1 (session9b/9c), though its design keeps ~128 KB of loads in flight per SM; a TMA ring
and longer row pieces did not change that. This probe separates the access pattern from the
kernel: each pattern only loads the bytes (16-byte ld.global.nc) and folds them into one word,
so its time is the pattern's, not the math's. Patterns:

* ``contig``: the whole matrix as one array, grid-stride, U loads in flight per thread (a copy
  kernel's read side: the roof for everything else).
* ``rowwarp``: one warp per weight row (or a piece of one), 512 contiguous bytes per warp load,
  U loads in flight per lane (a CUDA-core GEMV, as cuBLAS's gemv reads).
* ``tile``: stage 14's pattern: a warp owns units of 16 MT rows; lanes 4g..4g+3 read 64
  contiguous bytes of rows g and g + 8 of each m16 tile (the mma.sync A-fragment mapping), D
  64-byte chunks per row in flight (double-buffered in registers), a unit's K cut into S pieces
  so that every warp has work. ORDER 0: consecutive warps take consecutive K pieces of one unit
  (together they read a contiguous block of 16 MT rows); ORDER 1: consecutive warps take the
  same K piece of consecutive units (stage 14's row ranges per CTA read far-apart addresses).

Every pattern runs with BPS blocks per SM. Timing: R launches back to back between one CUDA
event pair, each on the next of several copies of the matrix (together >= 3x the L2, so every
launch starts cold), per-launch time = elapsed / R, the median of 7 repetitions: the events'
start-up (3.2-3.7 us, README "How a point is measured") is paid once per R launches, not per
launch. The output is one JSON row per (pattern, configuration, shape) with GB/s and the ratio
to ``contig``'s best at that shape.

    python -m gemmlab.bench.read_patterns [--shapes 6144x4096 8192x8192 57344x8192] [--out FILE]
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from typing import Dict, List

SRC = r"""
typedef unsigned long long u64;
struct __align__(16) V4 { unsigned x, y, z, w; };
__device__ __forceinline__ V4 ldnc(const char* p) {
    V4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ unsigned fold(V4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// the matrix as one array of n16 16-byte vectors
extern "C" __global__ void __launch_bounds__(RP_THREADS) contig(const char* w, u64 n16, unsigned* out) {
    unsigned acc = 0;
    const u64 stride = (u64)gridDim.x * RP_THREADS;
    u64 i = blockIdx.x * (u64)RP_THREADS + threadIdx.x;
    for (; i + (RP_U - 1) * stride < n16; i += RP_U * stride) {
        V4 v[RP_U];
#pragma unroll
        for (int u = 0; u < RP_U; ++u) v[u] = ldnc(w + 16 * (i + u * stride));
#pragma unroll
        for (int u = 0; u < RP_U; ++u) acc ^= fold(v[u]);
    }
    for (; i < n16; i += stride) acc ^= fold(ldnc(w + 16 * i));
    if (acc == 0x9e3779b9u) out[0] = acc;
}

// rows of rb bytes; an item is (row, piece of S): a warp reads its piece in 512-byte steps, RP_U in flight
extern "C" __global__ void __launch_bounds__(RP_THREADS) rowwarp(const char* w, u64 rows, u64 rb, unsigned S, unsigned* out) {
    unsigned acc = 0;
    const unsigned lane = threadIdx.x % 32;
    const u64 tw = (u64)gridDim.x * (RP_THREADS / 32), gw = blockIdx.x * (u64)(RP_THREADS / 32) + threadIdx.x / 32;
    const u64 steps = rb / 512, per = (steps + S - 1) / S;
    for (u64 item = gw; item < rows * S; item += tw) {
        const u64 r = item / S, s0 = (item % S) * per, s1 = s0 + per < steps ? s0 + per : steps;
        const char* p = w + r * rb + 16 * lane;
        u64 s = s0;
        for (; s + RP_U <= s1; s += RP_U) {
            V4 v[RP_U];
#pragma unroll
            for (int u = 0; u < RP_U; ++u) v[u] = ldnc(p + 512 * (s + u));
#pragma unroll
            for (int u = 0; u < RP_U; ++u) acc ^= fold(v[u]);
        }
        for (; s < s1; ++s) acc ^= fold(ldnc(p + 512 * s));
    }
    if (acc == 0x9e3779b9u) out[0] = acc;
}

// stage 14's pattern: units of 16*RP_MT rows, lanes 4g..4g+3 -> 64 bytes of rows g and g+8 of each m16 tile,
// RP_D chunks (64 bytes a row) per batch, two batches in flight; items (unit, piece of S)
extern "C" __global__ void __launch_bounds__(RP_THREADS) tile(const char* w, u64 rows, u64 rb, unsigned S, unsigned* out) {
    unsigned acc = 0;
    const unsigned lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const u64 tw = (u64)gridDim.x * (RP_THREADS / 32), gw = blockIdx.x * (u64)(RP_THREADS / 32) + threadIdx.x / 32;
    const u64 units = rows / (16 * RP_MT), chunks = rb / 64, per = (chunks + S - 1) / S;
    for (u64 item = gw; item < units * S; item += tw) {
        const u64 unit = RP_ORDER ? item % units : item / S, piece = RP_ORDER ? item / units : item % S;
        const u64 q0 = piece * per, q1 = q0 + per < chunks ? q0 + per : chunks;
        const char* base = w + unit * 16 * RP_MT * rb + g * rb + 16 * c;
        V4 cur[RP_D][RP_MT][2], nxt[RP_D][RP_MT][2];
        u64 q = q0;
        const bool full = q + RP_D <= q1;
        if (full) {
#pragma unroll
            for (int d = 0; d < RP_D; ++d)
#pragma unroll
                for (int t = 0; t < RP_MT; ++t)
#pragma unroll
                    for (int h = 0; h < 2; ++h) cur[d][t][h] = ldnc(base + (16 * t + 8 * h) * rb + 64 * (q + d));
        }
        for (; full && q + RP_D <= q1; q += RP_D) {
            const bool more = q + 2 * RP_D <= q1;
            if (more) {
#pragma unroll
                for (int d = 0; d < RP_D; ++d)
#pragma unroll
                    for (int t = 0; t < RP_MT; ++t)
#pragma unroll
                        for (int h = 0; h < 2; ++h) nxt[d][t][h] = ldnc(base + (16 * t + 8 * h) * rb + 64 * (q + RP_D + d));
            }
#pragma unroll
            for (int d = 0; d < RP_D; ++d)
#pragma unroll
                for (int t = 0; t < RP_MT; ++t)
#pragma unroll
                    for (int h = 0; h < 2; ++h) acc ^= fold(cur[d][t][h]);
            if (more) {
#pragma unroll
                for (int d = 0; d < RP_D; ++d)
#pragma unroll
                    for (int t = 0; t < RP_MT; ++t)
#pragma unroll
                        for (int h = 0; h < 2; ++h) cur[d][t][h] = nxt[d][t][h];
            }
        }
        for (; q < q1; ++q)
#pragma unroll
            for (int t = 0; t < RP_MT; ++t)
#pragma unroll
                for (int h = 0; h < 2; ++h) acc ^= fold(ldnc(base + (16 * t + 8 * h) * rb + 64 * q));
    }
    if (acc == 0x9e3779b9u) out[0] = acc;
}
"""

THREADS = 256


def configs() -> List[Dict]:
    """The sweep: every pattern's knobs (about 40 configurations)."""
    out = [dict(pattern="contig", U=u, BPS=b, MT=1, D=1, ORDER=0) for u, b in itertools.product((4, 8), (2, 4))]
    out += [dict(pattern="rowwarp", U=u, BPS=b, MT=1, D=1, ORDER=0) for u, b in itertools.product((2, 4, 8), (1, 2, 4, 8))]
    out += [dict(pattern="tile", U=1, BPS=b, MT=mt, D=d, ORDER=o)
            for mt, d, b, o in itertools.product((1, 2), (2, 4, 8), (1, 2, 4), (0, 1)) if mt * d <= 8]
    return out


def split_for(items: int, warps: int, limit: int) -> int:
    """The least S that gives every warp an item (items x S >= warps), at most `limit`."""
    return max(1, min(limit, -(-warps // max(1, items))))


def resident_blocks(regs: int) -> int:
    """Blocks of THREADS threads that fit on one SM by registers (65536 per SM, allocated per warp
    in units of 256) and by threads (2048 per SM); these kernels use no shared memory."""
    per_warp = -(-regs * 32 // 256) * 256
    return max(0, min(2048 // THREADS, 65536 // ((THREADS // 32) * per_warp)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["6144x4096", "8192x8192", "57344x8192"],
                    help="weight matrices N x K (bf16: K*2 bytes a row)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None, help="JSON lines file (default: stdout only)")
    a = ap.parse_args(argv)
    import cupy as cp

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    sms, l2 = props["multiProcessorCount"], props["l2CacheSize"]
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    rows_out = []
    mods = {}
    sink = cp.zeros(1, cp.uint32)
    fout = open(a.out, "w") if a.out else None
    try:
        for shape in a.shapes:
            n, k = (int(x) for x in shape.lower().split("x"))
            rb = 2 * k
            nbytes = n * rb
            copies = max(2, -(-3 * l2 // nbytes))
            bufs = [cp.random.randint(0, 2**31, size=nbytes // 4, dtype=cp.int32) for _ in range(copies)]
            best_contig = 0.0
            for c in configs():
                key = tuple(sorted(c.items()))
                if key not in mods:
                    opts = ("-std=c++17", *(f"-DRP_{k_}={c[k_]}" for k_ in ("U", "MT", "D", "ORDER")),
                            f"-DRP_THREADS={THREADS}")
                    mods[key] = cp.RawModule(code=SRC, options=opts).get_function(c["pattern"])
                fn = mods[key]
                fit = resident_blocks(fn.attributes["num_regs"])  # CuPy's RawKernel: the driver's attributes
                if c["BPS"] > fit:  # blocks past one wave would start late: not the pattern's time
                    print(json.dumps(dict(n=n, k=k, **c, skipped=f"{fit} blocks per SM fit")), flush=True)
                    continue
                grid = sms * c["BPS"]
                warps = grid * THREADS // 32
                if c["pattern"] == "contig":
                    S = 1
                    args = lambda b: (b, cp.uint64(nbytes // 16), sink)
                elif c["pattern"] == "rowwarp":
                    S = split_for(n, warps, rb // 512)
                    args = lambda b, S=S: (b, cp.uint64(n), cp.uint64(rb), cp.uint32(S), sink)
                else:
                    units = n // (16 * c["MT"])
                    S = split_for(units, warps, rb // 64 // c["D"])
                    args = lambda b, S=S: (b, cp.uint64(n), cp.uint64(rb), cp.uint32(S), sink)
                launches = max(4 * copies, 16)
                for b in bufs:  # warm-up: the clock up, the module loaded
                    fn((grid,), (THREADS,), args(b))
                times = []
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                for _ in range(a.reps):
                    fn((grid,), (THREADS,), args(bufs[-1]))  # busy while the host queues the rest
                    e0.record()
                    for i in range(launches):
                        fn((grid,), (THREADS,), args(bufs[i % copies]))
                    e1.record()
                    e1.synchronize()
                    times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3 / launches)
                t = statistics.median(times)
                gbps = nbytes / t / 1e9
                if c["pattern"] == "contig":
                    best_contig = max(best_contig, gbps)
                row = dict(device=name, n=n, k=k, bytes=nbytes, **c, S=S, grid=grid, launch_us=t * 1e6,
                           gbps=gbps, spread=(max(times) - min(times)) / t)
                rows_out.append(row)
            for r in rows_out:
                if r["n"] == n and r["k"] == k:
                    r["pct_of_contig"] = 100 * r["gbps"] / best_contig
                    line = json.dumps(r)
                    print(line, flush=True)
                    if fout:
                        fout.write(line + "\n")
            del bufs
            cp.get_default_memory_pool().free_all_blocks()
    finally:
        if fout:
            fout.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
