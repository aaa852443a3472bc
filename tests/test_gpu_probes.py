"""The GPU probes (gemmlab/backends/probes/) at tiny sizes, and every claim experiment run
whole at a tiny size. GPU tests skip with a reason where there is no CUDA device; the compile
test needs only nvcc, the tests of the probes' YAML nothing.

    pytest -m gpu tests/test_gpu_probes.py          # on the GPU host
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, compose_cfg, run_points

from gemmlab.backends import nvcc
from gemmlab.backends.probes import gpu as gpu_probe
from gemmlab.config import Backend, load_variant
from gemmlab.variants import files as variant_files
from gemmlab.points import expand

EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("claims_*.yaml"))
QUICK = ["measure=quick", "run.progress=false"]
# (the schema is loaded only for the files that name the backend: collection reads every variant)
GPU_PROBE_VARIANTS = {name: v for name, v in ((n, load_variant(n)) for n, path in variant_files().items()
                                              if "gpu_probe" in Path(path).read_text())
                      if v.backend == Backend.gpu_probe}
SOURCES = sorted({str(v.probe.source) for v in GPU_PROBE_VARIANTS.values() if v.probe.source})
ENTRIES = {  # kernels each probe source must export (the names the probes launch)
    "kernels/cuda/probes/streams.cu": {"vecadd_float32", "vecadd_float64"},
    "kernels/cuda/probes/smem.cu": {"smem_read_vec4", "smem_read_strided", "smem_latency"},
    "kernels/cuda/probes/wmma_layout.cu": {"wmma_gemm", "wmma_gemm_bcol_flag", "wmma_gemm_bcol"},
    "kernels/cuda/92_sgemm32_as_written.cu": {"sgemm32"},
    "kernels/cuda/probes/cache.cu": {"l2_read", "l1_read"},
    "kernels/cuda/probes/mma_peak.cu": {"mma_sync_peak", "mma_sync_peak_fp16"},
    "kernels/cuda/probes/wgmma_peak.cu": {f"wgmma_peak_n{n}" for n in (64, 128, 160, 192, 256)},
}
# the target a source's probe names (probe.arch), else the device's (sm_90 here)
ARCHS = {str(v.probe.source): v.probe.arch for v in GPU_PROBE_VARIANTS.values() if v.probe.source and v.probe.arch}


def test_probe_variants_name_the_kernel_source_they_compile():
    for name, v in GPU_PROBE_VARIANTS.items():
        if gpu_probe.PROBES[v.probe.kind].compiles:
            assert v.probe.source and (ROOT / v.probe.source).is_file(), (name, v.probe.source)
        else:
            assert v.probe.source is None, (name, "compiles no kernel but names one")
    assert set(SOURCES) == set(ENTRIES)


@pytest.mark.parametrize("source,reason", [
    ("null", "runs a kernel of its own and variant smem_latency names none: set probe.source"),
    ("kernels/cuda/probes/no_such_file.cu", "no_such_file.cu is not a file"),
])
def test_a_probe_without_its_kernel_source_fails_its_point(source, reason, tmp_path):
    cfg = compose_cfg(["variant=smem_latency", f"variant.smem_latency.probe.source={source}", "precision=fp32",
                       "sizes=probe"], tmp_path)
    point = next(p for p in expand(cfg) if p.skip_reason is None)
    backend = gpu_probe.GpuProbe(cfg)
    assert backend.skip_reason(point) is None
    fields = backend.measure_point(point, None, seed=0)  # fails before it needs the executor
    assert fields["status"] == "failed" and fields["op"] == "smem_latency"
    assert reason in fields["reason"], fields["reason"]


@pytest.mark.slow
@pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found on this machine")
@pytest.mark.parametrize("source", SOURCES)
def test_probe_sources_compile_and_export_their_kernels(source, tmp_path):
    flags = nvcc.build_flags(ARCHS.get(source, "sm_90"), extra=(f"-I{gpu_probe.KERNELS_DIR}",))
    cubin = nvcc.compile_cubin(ROOT / source, flags, tmp_path)
    assert ENTRIES[source] <= set(cubin.reports), sorted(cubin.reports)
    for entry in ENTRIES[source]:
        assert cubin.reports[entry].spill_bytes == 0, entry


def _run(tmp_path, variants, shapes, *extra, precision="fp32"):
    cfg = compose_cfg([f"variant=[{','.join(variants)}]", f"precision={precision}", "sizes.square=[]",
                       f"sizes.shapes={json.dumps(shapes, separators=(',', ':'))}", *QUICK, *extra], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    return {(r["variant"], int(r["m"]), int(r["n"]), int(r["k"])): r for r in rows}


def _extra(row) -> dict:
    return json.loads(row["extra"]) if row["extra"] else {}


@pytest.mark.gpu
def test_streams_copy_vecadd_gemv(tmp_path):
    rows = _run(tmp_path, ["copy_gpu", "vecadd_gpu", "gemv_gpu"], [[1 << 22, 1, 1], [512, 1, 384]],
                f"sizes.max_dim={1 << 22}")  # a vector of 4M elements is not an absurd size here
    copy, vec, gemv = rows[("copy_gpu", 1 << 22, 1, 1)], rows[("vecadd_gpu", 1 << 22, 1, 1)], \
        rows[("gemv_gpu", 512, 1, 384)]
    for r in (copy, vec, gemv):
        assert r["status"] == "ok", r["reason"]
        assert float(r["time_median_s"]) > 0 and r["timer"] == "cuda_event"
    assert copy["op"] == "copy" and float(copy["rel_error"]) == 0.0
    assert int(copy["bytes_min"]) == 2 * 4 * (1 << 22)
    assert vec["op"] == "vecadd" and float(vec["rel_error"]) < 1e-6  # only FP32 rounding of the sum
    assert int(vec["flops"]) == 1 << 22 and int(vec["bytes_min"]) == 12 * (1 << 22)
    assert gemv["op"] == "gemv" and float(gemv["rel_error"]) < 1e-5
    assert rows[("gemv_gpu", 1 << 22, 1, 1)]["status"] == "skipped"  # a vector shape is no GEMV
    assert rows[("copy_gpu", 512, 1, 384)]["status"] == "skipped"


@pytest.mark.gpu
def test_transfers_and_end_to_end_gemm(tmp_path):
    rows = _run(tmp_path, ["transfer_pageable", "transfer_pinned", "gemm_e2e_gpu", "cublas"], [[256, 256, 256]])
    page, pin = rows[("transfer_pageable", 256, 256, 256)], rows[("transfer_pinned", 256, 256, 256)]
    e2e, kern = rows[("gemm_e2e_gpu", 256, 256, 256)], rows[("cublas", 256, 256, 256)]
    for r in (page, pin, e2e, kern):
        assert r["status"] == "ok", r["reason"]
    assert _extra(page)["memory"] == "pageable" and _extra(pin)["memory"] == "pinned"
    assert int(page["bytes_min"]) == 3 * 4 * 256 * 256
    assert e2e["op"] == "gemm_e2e" and e2e["timer"] == "perf_counter"
    assert float(e2e["time_median_s"]) > float(kern["time_median_s"])  # transfers and launch on top


@pytest.mark.gpu
def test_shared_memory_probes(tmp_path):
    rows = _run(tmp_path, ["smem_bandwidth", "smem_bank_stride1", "smem_bank_stride32", "smem_bank_stride33",
                           "smem_latency"], [[1, 1, 1]])
    for r in rows.values():
        assert r["status"] == "ok", (r["variant"], r["reason"])
    t = {s: float(rows[(f"smem_bank_stride{s}", 1, 1, 1)]["time_median_s"]) for s in (1, 32, 33)}
    assert t[32] > 4 * t[33] and t[32] > 4 * t[1]  # the conflict serialises the reads
    cycles = _extra(rows[("smem_latency", 1, 1, 1)])["cycles_per_load"]
    assert 5 < cycles < 200
    assert _extra(rows[("smem_latency", 1, 1, 1)])["cycles_per_load_first_run"] == pytest.approx(cycles, rel=0.2)


@pytest.mark.gpu
@pytest.mark.parametrize("precision,kernel", [("bf16", "mma_sync_peak"), ("fp16", "mma_sync_peak_fp16")])
def test_mma_sync_peak_is_a_rate_below_the_dense_peak(tmp_path, precision, kernel):
    """Issue 20: the legacy mma.sync path's rate alone; its fraction of the dense (wgmma) peak is
    what stage 10 can reach at most (the row's pct_of_peak_at_clock), per operand type."""
    rows = _run(tmp_path, ["mma_sync_peak"], [[1, 1, 1]], precision=precision)
    r = rows[("mma_sync_peak", 1, 1, 1)]
    assert r["status"] == "ok", r["reason"]
    assert r["op"] == "mma_sync_peak" and float(r["tflops"]) > 0 and r["kernel_name"] == kernel
    assert f".{precision.replace('fp16', 'f16')}." in _extra(r)["instruction"]
    pct = r.get("pct_of_peak_at_clock")
    if pct not in (None, ""):
        assert 0 < float(pct) <= 100, pct
    print(f"{kernel}: {float(r['tflops']):.0f} TFLOP/s, {pct} % of the dense {precision} peak at its clock")


@pytest.mark.slow
@pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found on this machine")
def test_wgmma_peak_issues_each_n_as_stage_15_does(tmp_path):
    """The wgmma probe's kernels, one per N, issue the e4m3 QGMMA of that N four to a k-block and wait for
    each k-block (WARPGROUP.DEPBAR 0, stage 15's non-overlapped promotion), with no global loads; the
    device's own target (sm_90) refuses wgmma, hence the variant's probe.arch."""
    from test_hopper_kernels import opcodes
    from test_hopper_kernels import sass as disassemble

    source = ROOT / "kernels/cuda/probes/wgmma_peak.cu"
    cubin = nvcc.compile_cubin(source, nvcc.build_flags("sm_90a", extra=(f"-I{gpu_probe.KERNELS_DIR}",)), tmp_path)
    sass = disassemble(cubin.path)
    for n in (64, 128, 160, 192, 256):
        body = sass.split(f"Function : wgmma_peak_n{n}")[1].split("Function :")[0]
        ops = opcodes(body)
        # (nvcc unrolls the loop: k-blocks in a row, each four wgmmas and a wait for all of them)
        issued, waits = sum(x.startswith(f"QGMMA.64x{n}x32.F32.E4M3.E4M3") for x in ops), body.count("DEPBAR.LE gsb0, 0x0")
        assert issued > 0 and issued == 4 * waits, (n, issued, waits)
        assert not [x for x in ops if x.startswith("LDG")], n
    with pytest.raises(nvcc.CompileError):
        nvcc.compile_cubin(source, nvcc.build_flags("sm_90", extra=(f"-I{gpu_probe.KERNELS_DIR}",)), tmp_path / "90")


def test_wgmma_peak_runs_on_its_own_architecture_only(tmp_path):
    cfg = compose_cfg(["variant=wgmma_peak", "precision=fp8", "sizes=probe"], tmp_path)
    (point,) = [p for p in expand(cfg) if p.skip_reason is None]
    assert gpu_probe.probe_arch(point, "9.0") == "sm_90a"
    with pytest.raises(gpu_probe.ProbeSkip, match="built for sm_90a: it runs on compute capability 9.0 only, not 10.0"):
        gpu_probe.probe_arch(point, "10.0")
    backend = gpu_probe.GpuProbe(cfg)
    assert backend.skip_reason(point) is None
    bad = compose_cfg(["variant=wgmma_peak", "precision=fp8", "sizes=probe", "variant.wgmma_peak.probe.params.n=96"],
                      tmp_path)
    (p96,) = [p for p in expand(bad)]
    assert "N in 64, 128, 160, 192, 256, not 96" in (p96.skip_reason or backend.skip_reason(p96) or "")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [128, 160, 192, 256])
def test_wgmma_peak_is_a_rate_below_the_dense_peak(tmp_path, n):
    """Issue 30: the e4m3 wgmma rate at N, one k-block at a time per warpgroup (stage 15's issue pattern)."""
    rows = _run(tmp_path, ["wgmma_peak"], [[1, 1, 1]], f"variant.wgmma_peak.probe.params.n={n}", precision="fp8")
    r = rows[("wgmma_peak", 1, 1, 1)]
    assert r["status"] == "ok", r["reason"]
    assert r["op"] == "wgmma_peak" and float(r["tflops"]) > 0 and r["kernel_name"] == f"wgmma_peak_n{n}"
    assert f"m64n{n}k32" in _extra(r)["instruction"]
    pct = r.get("pct_of_peak_at_clock")
    if pct not in (None, ""):
        assert 0 < float(pct) <= 105, pct
    print(f"wgmma_peak n={n}: {float(r['tflops']):.0f} TFLOP/s, {pct} % of the dense fp8 peak at its clock")


@pytest.mark.gpu
def test_wmma_layout_and_alignment(tmp_path):
    rows = _run(tmp_path, ["wmma_layout", "wmma_alignment"], [[256, 256, 256]], precision="fp16")
    lay, ali = rows[("wmma_layout", 256, 256, 256)], rows[("wmma_alignment", 256, 256, 256)]
    assert lay["status"] == "ok", lay["reason"]
    x = _extra(lay)
    assert x["rel_error_vs_fp64_of_fp16_inputs"] < 1e-4 < x["rel_error_vs_fp64_of_fp32_data"] < 1e-2
    flag, col = x["wmma_gemm_bcol_flag"], x["wmma_gemm_bcol"]
    assert flag["rel_error_vs_a_times_b"] > 0.1 and flag["rel_error_vs_a_times_tile_transposed_b"] < 1e-2
    assert col["rel_error_vs_a_times_b"] > 0.1 and col["rel_error_vs_a_times_b_transposed"] < 1e-2
    assert ali["status"] == "ok", ali["reason"]
    offsets = _extra(ali)["offsets"]
    assert set(offsets) == {"2", "16"}
    for off, r in offsets.items():
        assert r["outcome"] in ("error", "wrong", "correct"), (off, r)
        assert r["aligned_rel_error"] < 1e-2 and r["pointer_mod_32"] == int(off) % 32


@pytest.mark.gpu
def test_unguarded_sgemm32(tmp_path):
    rows = _run(tmp_path, ["sgemm32_unguarded", "sgemm32_unguarded_ceil", "sgemm32_as_written"],
                [[100, 100, 100], [128, 128, 128]])
    odd, even = rows[("sgemm32_unguarded", 100, 100, 100)], rows[("sgemm32_unguarded", 128, 128, 128)]
    assert odd["status"] == "failed" and _extra(odd)["unwritten_elements"] > 0
    assert _extra(odd)["writes_past_c"] == 0  # the chapter's grid stays inside C
    assert even["status"] == "ok", even["reason"]
    ceil = rows[("sgemm32_unguarded_ceil", 100, 100, 100)]
    assert ceil["status"] == "failed" and _extra(ceil)["writes_past_c"] > 0
    assert rows[("sgemm32_as_written", 100, 100, 100)]["status"] == "skipped"
    assert rows[("sgemm32_as_written", 128, 128, 128)]["status"] == "ok"


@pytest.mark.gpu
def test_first_run(tmp_path):
    rows = _run(tmp_path, ["first_run_gpu"], [[512, 512, 512]], "variant.first_run_gpu.probe.params.idle_s=0.2")
    r = rows[("first_run_gpu", 512, 512, 512)]
    assert r["status"] == "ok", r["reason"]
    x = _extra(r)
    assert x["first_call_event_s"] > 0 and x["after_idle_event_s"] > 0 and x["idle_s"] == 0.2


TINY = {  # per experiment: the smallest sizes that still exercise each of its parts
    "claims_memory_roof": ["sizes.square=[]", "sizes.shapes=[[1048576,1,1],[256,1,128]]"],
    "claims_smem": [],
    "claims_ladder": ["sizes.square=[100,128]"],  # 100: no tile divides it
    "claims_tensor_cores": ["sizes.square=[256]"],
    "claims_tf32": ["sizes.shapes=[[64,64,256],[64,64,1024],[64,64,4096]]"],
    "claims_cpu_gpu": ["sizes.square=[16,64,128]"],
    "claims_first_run": ["sizes.square=[256]", "variant.first_run_gpu.probe.params.idle_s=0.2"],
}


def test_every_claims_experiment_has_a_tiny_size():
    assert set(TINY) == set(EXPERIMENTS)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_claims_experiment_runs_whole_at_a_tiny_size(name, tmp_path):
    cfg = compose_cfg([f"+experiment={name}", *TINY[name], *QUICK], tmp_path)
    _, rows = run_points(cfg, tmp_path / "run")
    measured = [r for r in rows if r["status"] != "skipped"]
    assert measured, rows
    wrong_on_purpose = {"smem_tiled_nosync", "sgemm32_unguarded", "sgemm32_unguarded_ceil"}
    for r in measured:
        assert r["status"] == "ok" or r["variant"] in wrong_on_purpose, (r["variant"], r["m"], r["reason"])


@pytest.mark.gpu
def test_cache_roofs_l1_above_l2_above_dram(tmp_path):
    """The L2 and L1 probes on a warm cache: DRAM (the datasheet's 4.8 TB/s) < L2 < L1 bandwidth;
    after a flush they refuse, naming measure.cache=warm."""
    cfg = compose_cfg(["+experiment=cache_roofs", *QUICK, "measure.cache=warm"], tmp_path)
    _, rows = run_points(cfg, tmp_path / "warm")
    by = {r["variant"]: r for r in rows}
    for v in ("l2_bandwidth", "l1_bandwidth"):
        assert by[v]["status"] == "ok", by[v]["reason"]
    gbs = {v: float(by[v]["bytes_min"]) / float(by[v]["time_median_s"]) / 1e9 for v in ("l2_bandwidth", "l1_bandwidth")}
    assert 4800 < gbs["l2_bandwidth"] < gbs["l1_bandwidth"], gbs
    cfg = compose_cfg(["variant=l2_bandwidth", "precision=fp32", "sizes=probe", *QUICK, "measure.cache=flush"], tmp_path)
    _, (r,) = run_points(cfg, tmp_path / "flush")
    assert r["status"] == "skipped" and "measure.cache=warm" in r["reason"]
