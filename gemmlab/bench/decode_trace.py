"""Where a decode kernel's time goes, warp by warp (issue 30): stage 16 (decode_rows) built with
``TRACE 1`` stamps the GPU's nanosecond clock (``%globaltimer``, one clock for every SM) at four
points of every warp: 0 its start, 1 its first step's weights in registers, 2 its last MMA, 3 its
end (the split units' arrival and reduction done), and writes its SM. From one launch's stamps:

* ``span``: the last warp's end minus the first warp's start; ``event`` - ``span``: what the CUDA
  event pair adds around the kernel (the front end's start-up, the launch);
* ``start_skew``: the last active warp's start after the first's (CTAs placed on the SMs);
* ``first_data``: a warp's start to its first weights (one cold DRAM round trip, with TLB misses);
* ``stream_p50``/``stream_max``: the warps' last MMA, median and last, after the first start;
  ``tail`` = ``span`` - ``stream_p50``: the stragglers' streaming plus the last reductions;
* ``finish_max``: the longest arrival-and-reduction of a warp after its last MMA.

Each configuration runs three ways: ``single`` (one launch between events, the GPU kept busy before
them by launches of the same kernel on other copies of the weights: no L2 or carveout change),
``after_memset`` (a 256 MiB memset before the events, as the harness's L2 flush), and ``b2b`` (R
launches back to back on rotating copies between one event pair: the events' start-up paid once);
cuBLAS at the same shape beside it, timed the same ways (no stamps). Every launch reads a copy of
the weights that is not in the L2 (copies together >= 3x the L2). ``--dump`` adds every warp's
stamps (ns after the first start) and SM of the last ``single`` launch to its row (``warps``).

``--variant decode_wgmma`` traces stage 17 instead (``TRACE 1``: thread 0 of every consumer
warpgroup stamps the kernel's start, its first stage's data in shared memory, its run's last MMA
and its end, and its SM): the same summary per consumer warpgroup ("warps" below), bf16 or
``--precision fp8`` (e4m3 with per-tensor scales, each operand quantized by its amax as the harness's
``measure.fp8_scaling=tensor`` does; the library beside it cuBLASLt, whose FP8 kernels take M a
multiple of 16 only: a row saying so at the other token counts).

    python -m gemmlab.bench.decode_trace [--variant decode_rows|decode_wgmma] [--precision bf16|fp8] \
        [--shapes 1x6144x4096 1x8192x28672] [--defines "{RING:0}" "{RING:3}"] [--reps 15] [--dump] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Dict, List, Optional, Sequence

FLUSH_BYTES = 256 << 20


def parse_defines(text: str) -> Dict[str, int]:
    """"{A:1,B:0}" -> {"A": 1, "B": 0} (the Hydra override's form)."""
    body = text.strip().strip("{}").strip()
    out = {}
    for item in filter(None, (x.strip() for x in body.split(","))):
        key, _, value = item.partition(":")
        out[key.strip()] = int(value)
    return out


def define_override(defines: Dict[str, int]) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in defines.items()) + "}"


def active_warps(units: int, steps: int, warps: int) -> List[bool]:
    """Which warps get a non-empty stream-K range (stage 16, XSHARE 0): range p is
    [p * len // warps, (p + 1) * len // warps) of len = units * steps positions."""
    n = units * steps
    return [p * n // warps < (p + 1) * n // warps for p in range(warps)]


WORDS = 5  # per warp: four stamps and the SM
# the stages that stamp (TRACE 1), with their default configurations
TRACED = {"decode_rows": ["{RING:0}", "{RING:3}"], "decode_wgmma": ["{}"]}


def wgmma_trace_layout(let: Dict[str, int], defines: Dict[str, int], n: int) -> Dict[str, int]:
    """Where stage 17's stamps lie in its workspace (conf/variant/decode_wgmma.yaml's workspace_bytes): after
    a counter per CTA tile and consumer (to 256 bytes) and two slots of BW x NTOK floats per CTA, one record
    of WORDS words per consumer warpgroup of the grid."""
    g, bw, ntok = let["G"], let["BW"], defines["NTOK"]
    consumers, cluster = defines["CONSUMERS"], defines["CLUSTER"]
    counters = 256 * -(-(-(-n // (bw * cluster)) * cluster * consumers) // 64)
    return dict(offset=counters + g * 2 * bw * ntok * 4, records=g * consumers)


def trace_stats(stamps, active: Sequence[bool]) -> Dict[str, float]:
    """The summary (microseconds) of one launch's stamps, an array [warp][4 or more] of nanoseconds
    (a fifth column, the SM, is not a time)."""
    rows = [tuple(int(x) for x in s[:4]) for s, a in zip(stamps, active) if a]
    if not rows:
        raise ValueError("no active warp")
    t0 = min(r[0] for r in rows)
    us = lambda ns: ns / 1e3  # noqa: E731
    ends = sorted(r[2] - t0 for r in rows)
    span = max(r[3] for r in rows) - t0
    p50 = ends[len(ends) // 2]
    every = sorted({x for r in rows for x in r})
    steps = [b - a for a, b in zip(every, every[1:]) if b > a]
    return {
        "span_us": us(span),
        "start_skew_us": us(max(r[0] for r in rows) - t0),
        "first_data_med_us": us(statistics.median(r[1] - r[0] for r in rows)),
        "first_data_max_us": us(max(r[1] - r[0] for r in rows)),
        "stream_p10_us": us(ends[len(ends) // 10]),
        "stream_p50_us": us(p50),
        "stream_p90_us": us(ends[(9 * len(ends)) // 10]),
        "stream_max_us": us(ends[-1]),
        "tail_us": us(span - p50),
        "finish_med_us": us(statistics.median(r[3] - r[2] for r in rows)),
        "finish_max_us": us(max(r[3] - r[2] for r in rows)),
        "clock_step_ns": min(steps) if steps else 0,
    }


def dump_warps(stamps, active: Sequence[bool]) -> List[List[int]]:
    """Per warp: [start, first data, last MMA, end] in ns after the first active warp's start, the
    SM, and 1 if its range was not empty."""
    t0 = min(int(s[0]) for s, a in zip(stamps, active) if a)
    return [[int(x) - t0 for x in s[:4]] + [int(s[4]), int(a)] for s, a in zip(stamps, active)]


def _median_dict(ds: List[Dict[str, float]]) -> Dict[str, float]:
    return {k: statistics.median(d[k] for d in ds) for k in ds[0]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gemmlab.bench.decode_trace", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["1x6144x4096", "1x28672x4096", "1x8192x28672", "16x8192x28672"],
                    help="M x N x K (tokens x out x in), layout nt")
    ap.add_argument("--variant", choices=sorted(TRACED), default="decode_rows",
                    help="the traced stage: 16 (decode_rows, a record per warp) or 17 (decode_wgmma, per consumer "
                         "warpgroup)")
    ap.add_argument("--precision", choices=["bf16", "fp8"], default="bf16",
                    help="bf16, or fp8 (e4m3, per-tensor scales as measure.fp8_scaling=tensor makes them; the library "
                         "beside it cuBLASLt, at M a multiple of 16 only)")
    ap.add_argument("--defines", nargs="+", default=None,
                    help="define overrides of the traced stage, one configuration each (TRACE 1 is added); default: "
                         "stage 16 {RING:0} {RING:3}, stage 17 its YAML's")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-cublas", action="store_true")
    ap.add_argument("--dump", action="store_true", help="every warp's stamps of the last single launch")
    ap.add_argument("--out", default=None, help="JSON lines file (default: stdout only)")
    a = ap.parse_args(argv)
    if a.defines is None:
        a.defines = TRACED[a.variant]

    import cupy as cp
    import numpy as np

    from gemmlab import operands
    from gemmlab.backends.base import backend_class
    from gemmlab.backends.cuda_kernels import launch_shape
    from gemmlab.config import compose
    from gemmlab.gpu import arrays
    from gemmlab.points import expand

    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    l2 = props["l2CacheSize"]
    flush = cp.empty(FLUSH_BYTES, dtype=cp.uint8)
    stream = cp.cuda.get_current_stream()
    fout = open(a.out, "w") if a.out else None
    rng = np.random.default_rng(1)

    def emit(row: dict) -> None:
        line = json.dumps(row)
        print(line, flush=True)
        if fout:
            fout.write(line + "\n")
            fout.flush()

    def timed(fns, busy, mode: str, reps: int, on_rep=None):
        """Per rep: (event microseconds, index of the fn timed); b2b: per-launch microseconds.
        ``on_rep(us, i)`` right after each single launch (before the next one reuses anything)."""
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        out = []
        for r in range(reps):
            i = r % len(fns)
            if mode == "b2b":
                busy(i)
                e0.record(stream)
                launches = max(16, 4 * len(fns))
                for q in range(launches):
                    fns[(i + q) % len(fns)]()
                e1.record(stream)
                e1.synchronize()
                out.append((cp.cuda.get_elapsed_time(e0, e1) * 1e3 / launches, i))
                continue
            if mode == "after_memset":
                busy(i)
                cp.cuda.runtime.memsetAsync(flush.data.ptr, r & 0xFF, FLUSH_BYTES, stream.ptr)
            else:
                busy(i)
            e0.record(stream)
            fns[i]()
            e1.record(stream)
            e1.synchronize()
            out.append((cp.cuda.get_elapsed_time(e0, e1) * 1e3, i))
            if on_rep is not None:
                on_rep(*out[-1])
        return out

    for shape in a.shapes:
        m, n, k = (int(x) for x in shape.lower().split("x"))
        fp8 = a.precision == "fp8"
        nbytes = n * k * (1 if fp8 else 2)
        copies = max(3, -(-3 * l2 // nbytes))
        sa, sb = operands.stored_shapes(m, n, k, "nt")
        x32 = cp.asarray(rng.standard_normal(sa, dtype=np.float32))
        w32s = [cp.asarray(rng.standard_normal(sb, dtype=np.float32)) for _ in range(copies)]
        if not fp8:  # the storage type of every configuration; fp8's each backend quantizes as the harness does
            x, ws = arrays.cast(cp, x32, "bfloat16"), [arrays.cast(cp, w, "bfloat16") for w in w32s]
            del x32, w32s
        c = arrays.empty(cp, (m, n), "bfloat16")
        base = [f"precision={a.precision}", "layouts=[nt]", "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]",
                "measure.baseline=[]"] + (["measure.fp8_scaling=tensor"] if fp8 else [])
        library = "cublaslt" if fp8 else "cublas"
        configs = [(a.variant, d) for d in a.defines] + ([] if a.no_cublas else [(library, None)])
        for variant, dtext in configs:
            row = dict(device=props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
                       m=m, n=n, k=k, bytes=nbytes, copies=copies, variant=variant)
            try:
                over = base + [f"variant={variant}"]
                if dtext is not None:
                    defines = {**parse_defines(dtext), "TRACE": 1}
                    row["defines"] = dtext
                    over.append(f"variant.{variant}.cuda.defines={define_override(defines)}")
                cfg = compose(over)
                (p,) = [q for q in expand(cfg) if q.variant == variant]
                if p.skip_reason:
                    raise RuntimeError(p.skip_reason)
                if dtext is not None:  # the build's values where the YAML's rules choose them (NTOK, CONSUMERS, ...)
                    row["point_defines"] = {k2: v for k2, v in p.point_defines().items() if k2 != "TRACE"}
                be = backend_class(p.backend)(cfg)
                be.prepare([p])
                if fp8:  # e4m3 with per-tensor scales, as the harness makes them for this backend (references dropped)
                    made = [be.make_inputs(p, x32, w)[:2] for w in w32s]
                    launches = [be.make_launch(p, xq, wq, c) for xq, wq in made]
                else:
                    launches = [be.make_launch(p, x, w, c) for w in ws]
                fns = [lc.fn for lc in launches]
                # the same kernel on two other copies of the weights, never the one timed next (its weights would
                # come from the L2: before 2026-12-05 the last two copies were, whichever was timed)
                busy = lambda i: (fns[(i + 1) % len(fns)](), fns[(i + 2) % len(fns)]())  # noqa: E731
                for f in fns:  # warm-up: module loaded, clocks up
                    f()
                stream.synchronize()
                if variant == "decode_rows":
                    shape_l = launch_shape(p)
                    let = dict(shape_l.let)
                    nt = dict(p.point_defines())["NT"]
                    warps = let["G"] * 8
                    units, steps = let["UNITS"], -(-k * 2 // 512)
                    # BALANCE: every warp of a CTA stamps (chunks are claimed, not assigned)
                    active = ([True] * warps if dict(p.point_defines()).get("BALANCE")
                              else active_warps(units, steps, warps))
                    trace_off = 4 * ((units + 63) // 64) * 64 + warps * 2 * nt * 512
                    row.update(grid=let["G"], warps=warps, active_warps=sum(active), steps=steps, units=units)
                elif variant == "decode_wgmma":
                    let = dict(launch_shape(p).let)
                    lay = wgmma_trace_layout(let, p.expr_env(), n)
                    warps, trace_off, active = lay["records"], lay["offset"], None  # active: from the stamps
                    row.update(grid=let["G"], warps=warps)
                for mode in ("single", "after_memset", "b2b"):
                    stats, last = [], []

                    def read_stamps(t, i):  # the stamps of the launch this rep timed
                        wsp = launches[i].fn.keepalive[1]
                        nb = warps * WORDS * 8
                        stamps = wsp[trace_off:trace_off + nb].view(cp.uint64).reshape(warps, WORDS).get()
                        act = active if active is not None else [int(r[1]) != 0 for r in stamps]
                        st = trace_stats(stamps, act)
                        st["outside_us"] = t - st["span_us"]
                        stats.append(st)
                        last[:] = [(stamps, act)]

                    traced = variant in TRACED and mode != "b2b"
                    res = timed(fns, busy, mode, a.reps, read_stamps if traced else None)
                    ev = statistics.median(t for t, _ in res)
                    out = dict(row, mode=mode, event_us=ev, event_min_us=min(t for t, _ in res),
                               gbps=nbytes / ev / 1e3)
                    if stats:
                        out.update(_median_dict(stats))
                    if a.dump and last and mode == "single":
                        out["warps"] = dump_warps(*last[0])
                    emit(out)
            except Exception as e:  # one configuration's failure never ends the probe
                emit(dict(row, error=f"{type(e).__name__}: {e}"))
            finally:
                cp.get_default_memory_pool().free_all_blocks()
        del c
        if fp8:
            del x32, w32s
        else:
            del x, ws
        cp.get_default_memory_pool().free_all_blocks()
    if fout:
        fout.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
