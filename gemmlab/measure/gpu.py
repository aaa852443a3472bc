"""The GPU executor: for each point, inputs on the device, the FP64 check on poisoned output, then
the timed samples, interleaved with the cuBLAS baselines of the same precision and shape so that
"% of cuBLAS" compares the two under the same clock state."""
from __future__ import annotations

import contextlib
import functools
import logging
import math
from typing import Any, Dict, List, Optional, Sequence

from gemmlab import dtypes, operands, rows, samples
from gemmlab.config import CachePolicy, Distribution
from gemmlab.gpu import arrays
from gemmlab.gpu.device import free_bytes, info, no_device_reason, release_cached
from gemmlab.measure import check, footprint, guards, validity
from gemmlab.measure.nvml import drift as nvml_drift
from gemmlab.measure.stats import timing_fields

log = logging.getLogger("gemmlab")

MAX_ROTATE_SETS = 16


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


_PRIMED: set = set()  # the kinds of output whose check kernels CuPy has compiled in this process (_prime_check)


class GpuExecutor:
    kind = "gpu"

    def __init__(self, cfg):
        self.cfg = cfg
        self.measure = cfg.measure
        self._reason = no_device_reason()
        self._ready = False
        # the watchdog's phase reports (gemmlab/measure/worker): set by a worker, a no-op in process
        self.watch = lambda phase, expected_s=None, limit_s=None: None

    def unavailable(self) -> Optional[str]:
        return self._reason

    def _init(self) -> None:
        if self._ready:
            return
        import cupy

        from gemmlab.measure.nvml import Nvml, Sampler
        from gemmlab.measure.timer import GpuTimer

        self.cp = cupy
        self.dev = info()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.nvml = Nvml(self.dev["pci_bus_id"])
        # the physical GPU (nvidia-smi's index and UUID), also in a job pinned by CUDA_VISIBLE_DEVICES
        from gemmlab.gpu.identity import gpu_identity

        self._identity = gpu_identity()
        # a partial, not a lambda over self: the timer must not hold its executor, or the two form a
        # cycle that only Python's cyclic GC frees, keeping the flush buffer and stream of a finished
        # run alive at a time nobody chooses (close() frees them when a run ends)
        self.timer = GpuTimer(self.measure, self.stream, self.dev["l2_bytes"],
                              functools.partial(Sampler, self.nvml))
        self._ready = True

    def close(self) -> None:
        """Free what this executor holds on the GPU (the timer's flush buffer, the stream) when its
        run ends, so that the next run of the process allocates into the state the first run found.
        Harmless twice; a later point initialises again."""
        if not self._ready:
            return
        stream, self.timer, self.stream, self._ready = self.stream, None, None, False
        try:
            stream.synchronize()
            self.cp.get_default_memory_pool().free_all_blocks()
        except Exception as e:  # a context a fault left unusable: the process ends anyway
            log.debug("close: %s", _first_line(e))

    def device_fields(self) -> Dict[str, Any]:
        self._init()
        d = self.dev
        return {"device": d["device"], **self._identity, "sm_count": d["sm_count"], "l2_bytes": d["l2_bytes"],
                "driver_version": d["driver_version"], "cuda_runtime_version": d["cuda_runtime_version"],
                "cupy_version": d["cupy_version"]}

    def limits(self, p, n_baselines: int = 0):
        """The watchdog's limits for ``p`` on this device (gemmlab/measure/worker/limits.py)."""
        from gemmlab.measure.worker.limits import SLOW_FRACTION, Limits

        peaks = self.cfg.device.peak_tflops or {}
        peak = 1e12 * float(peaks.get(p.compute) or max(peaks.values(), default=1.0))
        slow = 1e12 * SLOW_FRACTION * float(peaks.get("fp32") or min(peaks.values(), default=1.0))
        return Limits.of(self.measure, p.flops, peak, slow, n_baselines)

    def report(self, limits, phase: str) -> None:
        expected_s, limit_s = limits.phase(phase)
        self.watch(phase, expected_s, limit_s)

    @contextlib.contextmanager
    def _searches_watched(self, limits, backends):
        """While the point's launches are made, a backend's search (``Backend.watch_search``)
        reports its own phase to the watchdog, with a limit for its trials; then the rest of the
        setup gets its own."""
        from gemmlab.measure.worker.limits import AFTER_SEARCH, SEARCH

        def watch_search(n_trials):
            if n_trials:
                self.watch(f"{SEARCH} of {int(n_trials)} trials", *limits.search(n_trials))
            else:
                self.watch(AFTER_SEARCH, *limits.after_search())

        for b in backends:
            b.watch_search = watch_search
        try:
            yield
        finally:
            for b in backends:
                b.__dict__.pop("watch_search", None)

    def _n_sets(self, p) -> int:
        if self.measure.cache != CachePolicy.rotate:
            return 1
        per = p.bytes_min  # what a call reads and writes; an fp8 set's references stay out of the kernel's way
        return int(min(MAX_ROTATE_SETS, max(2, math.ceil(2 * self.dev["l2_bytes"] / per) + 1)))

    # -- one point ----------------------------------------------------------------------------
    def measure_point(self, point, backend, seed: int, baselines: Sequence = ()) -> Dict[str, Any]:
        """Measure ``point`` with ``backend``; ``baselines`` (name, point, backend), resolved by the
        runner, are timed interleaved with it."""
        self._init()
        before = self.nvml.foreign()
        with self.stream:
            try:
                if backend.measure_point is not None:
                    fields = backend.measure_point(point, self, seed)
                else:
                    fields = self._measure(point, backend, seed, baselines)
            except check.InputError as e:
                fields = {"status": "failed", "reason": f"inputs: {e}"}
            finally:
                self.stream.synchronize()
                for _name, _bp, b in baselines:
                    b.release()
                release_cached()
        return self.finish(point, fields, before, self.nvml.foreign())

    def finish(self, p, fields: Dict[str, Any], before, after) -> Dict[str, Any]:
        """Contention and impossible results, the same for every GPU backend."""
        fields = dict(fields)
        extra = dict(fields.get("extra") or {})
        pids = set(before or ()) | set(after or ()) | set(extra.get("timer", {}).get("foreign_pids", ()))
        if before is not None or after is not None:
            fields["contended"] = bool(pids)
            if pids:
                extra["foreign_pids"] = sorted(pids)
                fields["extra"] = extra
        rates = self.cfg.device.sm_flops_per_clock or {}
        cc = self.cfg.device.get("compute_capability")
        rate = rates.get(p.compute) if cc == self.dev["cc"] else None
        clock = rows.highest_clock_mhz({**fields, "extra": extra}, self.nvml.max_sm_clock_mhz)
        if rate and clock and fields.get("status") == "ok" and fields.get("flops", p.flops):
            fields["peak_at_clock_tflops"] = peak = validity.peak_tflops(rate, self.dev["sm_count"], clock)
            if fields.get("tflops") and peak:
                fields["pct_of_peak_at_clock"] = 100.0 * fields["tflops"] / peak
        row = {"op": "gemm", "precision": p.precision, "flops": p.flops, "bytes_min": p.bytes_min,
               **fields, "extra": extra}
        why = validity.impossible(row, rate, self.dev["sm_count"], clock, self.cfg.device.memory_bandwidth_gbs,
                                  self.dev["l2_bytes"])
        if why:
            fields.update(status="failed", reason=why)
        return fields

    def reference(self, p, a_ref, b_ref):
        """The check's reference for a GEMM point on this device (gemmlab/measure/check.py)."""
        return check.gemm_reference(self.cp, p, self.kind, a_ref, b_ref, self.exact)

    @property
    def exact(self) -> bool:
        return self.measure.distribution == Distribution.exact

    def _measure(self, p, backend, seed: int, baselines: Sequence = ()) -> Dict[str, Any]:
        cp, m = self.cp, self.measure
        n_sets = self._n_sets(p)
        why = footprint.too_big(footprint.point_bytes(p, m, n_sets), free_bytes(), "device")
        if why:
            return {"status": "skipped", "reason": why}

        zones = guards.Guards(cp, m.guard_bytes)
        sets = self.make_sets(p, backend, seed, n_sets, zones)
        limits = self.limits(p, len(baselines))
        with self._searches_watched(limits, [backend] + [b for _n, _bp, b in baselines]):
            launches = [backend.make_launch(p, s[0], s[1], s[4]) for s in sets]
            # the baselines' launches (nvmath plans, a first PyTorch call) and the check's first-use compiles before
            # the checked call's limit, under the whole point's (or, after a search, the rest of the setup's)
            baseline_calls = list(self._baseline_calls(p, sets, baselines))
        row: Dict[str, Any] = {**launches[0].info, "cache": m.cache.value, **zones.fields()}
        row["extra"] = dict(launches[0].info.get("extra") or {})  # the backend's own details
        if n_sets > 1:
            row["extra"]["rotate_sets"] = n_sets

        _a, _b, a_ref, b_ref, c = sets[0]
        reference = self.reference(p, a_ref, b_ref) if m.check else None
        self._prime_check(reference, c, zones)
        if reference is not None:
            self.report(limits, "checked call")
            # >1 repeats: a race shows as an error that moves; the worst repeat decides
            res, results = check.checked_calls(launches[0].fn, lambda: arrays.poison(cp, c),
                                               lambda: reference.verify(c), m.check_repeats)
            row.update(res.fields())
            if len(results) > 1:
                row["extra"].update(check.spread(results))
            why = zones.violation()  # a write outside C, or into A or B, before what C holds
            if zones.on:
                row["extra"]["guards"] = zones.extra()
            if why or not res.passed:
                reference.release()
                return {**row, "guard_check": why or ("clean" if zones.on else None), "status": "failed",
                        "reason": why or res.failure()}
        else:  # timed, never checked (measure.check=false): the analysis leaves such rows out of its evidence
            row["extra"]["check"] = "off"

        calls: List[List] = [[l.fn for l in launches]]
        names = [p.variant]
        for name, fns in baseline_calls:
            calls.append(fns)
            names.append(name)
        self.report(limits, "timed samples")  # the graphs' capture and the samples
        graph_note = None
        if m.cuda_graph:
            try:
                calls = [[self.timer.capture_graph(f) for f in fns] for fns in calls]
            except Exception as e:  # e.g. CuPy refuses cuBLAS calls during stream capture
                graph_note = f"cuda_graph capture failed, timed plain launches: {_first_line(e)}"
                log.warning("%s: %s", p.variant, graph_note)
                self.cp.cuda.runtime.deviceSynchronize()
        timed = self.timer.measure(calls)

        t = timed[0]
        fields, timer_extra = self.timed_fields(t, p.flops, graph=m.cuda_graph and not graph_note)
        fields["_samples"] += [samples.entry(name, x.times_s, x.sm_clock_inband_mhz)
                               for name, x in zip(names[1:], timed[1:])]
        row.update(fields)
        row["extra"]["timer"] = timer_extra
        if graph_note:
            row["extra"]["cuda_graph"] = graph_note
        if len(timed) > 1:
            best = min(range(1, len(timed)), key=lambda i: timed[i].summary.median_s)
            bt = timed[best]
            row.update(baseline_variant=names[best], baseline_time_median_s=bt.summary.median_s,
                       baseline_tflops=p.flops / bt.summary.median_s / 1e12,
                       pct_of_baseline=100.0 * bt.summary.median_s / t.summary.median_s,
                       baseline_sm_clock_min_mhz=bt.clocks.sm_clock_min_mhz,
                       baseline_sm_clock_max_mhz=bt.clocks.sm_clock_max_mhz)
        if m.energy:
            self.report(limits, "energy window")
            row.update(self.energy_fields(launches[0].fn, t.summary.median_s, p.flops, row["extra"]))
        # after the energy window too: thousands more calls on the same output
        self.report(limits, "check after timing")
        self.stream.synchronize()
        guard_why = zones.violation()
        if zones.on:
            row["guard_check"] = f"after timing: {guard_why}" if guard_why else "clean"
            row["extra"]["guards"] = zones.extra()
        why = check.recheck(reference, sets[0][4], row) if reference is not None else None
        why = f"after timing: {guard_why}" if guard_why else why
        return {**row, "status": "failed", "reason": why} if why else {**row, "status": "ok"}

    def energy_fields(self, fn, call_s: float, flops: int, extra: Dict[str, Any]) -> Dict[str, Any]:
        """energy_j, gflops_per_joule, power and clocks of ``fn`` run back to back for
        measure.energy_s (gemmlab/measure/energy.py); a note in extra where NVML cannot say."""
        from gemmlab.measure import energy
        from gemmlab.measure.nvml import Sampler

        try:
            w = energy.measure(fn, self.stream.synchronize, self.nvml, call_s, self.measure.energy_s,
                               functools.partial(Sampler, self.nvml))
        except RuntimeError as e:
            extra["energy"] = f"not measured: {e}"
            return {}
        fields = w.fields(flops)
        extra["energy"] = fields.pop("_energy_extra")
        return fields

    def timed_fields(self, t, flops: int, graph: bool = False, cache: Optional[str] = None, call: str = ""):
        """The row fields of one timed call and its ``extra.timer``: the one timing-to-row path
        of every GPU backend (GEMMs and probes). ``_samples`` (popped by the runner, written to
        samples.parquet) holds the call's per-sample times and in-band clocks."""
        m = self.measure
        row = dict(timing_fields(t.summary, flops))
        row["_samples"] = [samples.entry(call, t.times_s, t.sm_clock_inband_mhz)]
        row.update(t.clocks.fields(self.nvml.max_sm_clock_mhz, m.throttle_fraction, m.clock_stable_fraction))
        inband = t.inband_range()  # [min, median, max] MHz the spin measured before the samples
        if inband:  # NVML polls every 5 ms; the spin reads the clock right before each sample
            steady = inband[2] - inband[0] <= m.clock_stable_fraction * inband[2]
            row["clock_stable"] = bool(row.get("clock_stable", True)) and steady
        kind = "cuda_graph" if graph else "cuda_event"
        row.update(timer="cupti_kernel" if t.event_times_s else kind, warmup_s=t.warmup_s)
        if cache is not None:
            row["cache"] = cache
        extra = t.timer_fields(m)
        drift = nvml_drift(t.sm_clock_inband_mhz) if t.sm_clock_inband_mhz else t.clocks.drift
        if drift is not None:
            extra["sm_clock_drift"] = round(drift, 4)
        if t.clocks.foreign_pids:
            extra["foreign_pids"] = list(t.clocks.foreign_pids)
        return row, extra

    def _prime_check(self, reference, c, zones) -> None:
        """The check's CuPy kernels compiled before the checked call's watchdog limit starts. CuPy compiles
        each elementwise and reduction kernel on first use (NVRTC, then a disk cache): on a fresh machine the
        first point's verify and guard compare outlasted the checked call's 10 s limit, and a correct kernel
        timed out (h100-2026-12-05/session33e: the isolation tests first on the machine). Once per process and
        kind of output: its storage type, exact or bounded, and whether C, R or a guarded buffer passes 2 GiB
        (CuPy builds a kernel apiece for 32- and 64-bit indexing). Verified poisoned, so verify's failure path
        compiles too (the checked call poisons C again); the guard compare's failure path once per process, on a few
        bytes (guards.prime_failure_path). Without a reference (measure.check=false): the guard compare."""
        big = lambda x: x is not None and x.nbytes > 1 << 31  # noqa: E731
        key = (str(c.dtype), None if reference is None else reference.exact, big(c),
               reference is not None and big(reference.r), any(big(z.buf) or big(z.kept) for z in zones.zones))
        if key in _PRIMED:
            return
        if reference is not None:
            arrays.poison(self.cp, c)
            reference.verify(c)
        zones.violation()
        if zones.on and "guards' failure path" not in _PRIMED:
            guards.prime_failure_path(self.cp)
            _PRIMED.add("guards' failure path")
        self.stream.synchronize()
        _PRIMED.add(key)

    def make_sets(self, p, backend, seed: int, n_sets: int, zones: Optional[guards.Guards] = None):
        """``n_sets`` tuples (a, b, a_ref, b_ref, c) of fresh random inputs from ``seed``; with
        ``zones``, A, B and C of each set sit between guards (gemmlab/measure/guards.py)."""
        cp, m = self.cp, self.measure
        rng = cp.random.default_rng(seed)
        sets = []
        shape_a, shape_b = operands.logical_shapes(p.m, p.n, p.k, p.batch)
        ta, tb = operands.transposed(p.layout)
        for _ in range(n_sets):
            a32 = check.random_matrix(cp, rng, shape_a, m.distribution.value, m.input_scale)
            b32 = check.random_matrix(cp, rng, shape_b, m.distribution.value, m.input_scale)
            # stored as the layout says (gemmlab/operands.py), transposed in FP32 before the cast
            # (CuPy copies every storage type it casts to from a contiguous FP32 array); the
            # check reads the logical operands
            a32, b32 = operands.store(cp, a32, ta), operands.store(cp, b32, tb)
            if backend.wants_fp32_inputs(p):
                a, b = a32, b32
            else:
                a, b = arrays.cast(cp, a32, p.in_dtype), arrays.cast(cp, b32, p.in_dtype)
            del a32, b32
            a, b, a_ref, b_ref = backend.make_inputs(p, a, b)
            a_ref, b_ref = operands.logical(a_ref, ta), operands.logical(b_ref, tb)
            shape_c = operands.output_shape(p.m, p.n, p.batch)
            if zones is not None and zones.on:
                tag = f"#{len(sets)}" if n_sets > 1 else ""
                a, b = zones.input(a, f"A{tag}"), zones.input(b, f"B{tag}")
                c = zones.output(shape_c, dtypes.numpy_dtype(p.out_dtype), f"C{tag}")
            else:
                c = arrays.empty(cp, shape_c, p.out_dtype)
            sets.append((a, b, a_ref, b_ref, c))
        return sets

    # -- baselines ------------------------------------------------------------------------------
    def _baseline_calls(self, p, sets, baselines):
        """(name, one callable per input set) of each baseline the runner resolved for ``p``."""
        for name, bp, b in baselines:
            try:
                # its own output: the variant's stays as its timed calls left it (checked after)
                fns = [b.make_launch(bp, a, bb, arrays.empty(self.cp, c.shape, bp.out_dtype)).fn
                       for a, bb, _ar, _br, c in sets]
                yield name, fns
            except Exception as e:  # a baseline that cannot run leaves the columns empty
                log.warning("baseline %s for %s: %s", name, p.variant, e)
