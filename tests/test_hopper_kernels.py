"""Hopper stages without a GPU: each builds for sm_90a with no spills, its SASS uses the tensor-core
path it claims (HMMA for mma_sync, HGMMA for the wgmma stages), the configs expand with the right
skips, and the tensor-map specs obey TMA's rules.

The helpers here (`build`, `find_cuobjdump`, `sass`) are imported by test_gpu_hopper_kernels.py.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, compose_cfg, session_folder

HOPPER_VARIANTS = ("mma_sync", "wgmma_tma", "wgmma_ws")
SMEM_PER_BLOCK_MAX = 227 * 1024  # sm_90 opt-in limit per block (cudaDevAttrMaxSharedMemoryPerBlockOptin)


@functools.lru_cache(maxsize=None)
def find_cuobjdump():
    """cuobjdump from PATH, the nvidia-cuda-cuobjdump wheel, or Triton's bundled copy; else None.

    cuobjdump -sass also needs nvdisasm: it is looked up beside the cuobjdump that is found.
    """
    candidates = [shutil.which("cuobjdump")]
    for site in sys.path:
        candidates += glob.glob(os.path.join(site, "nvidia", "cu*", "bin", "cuobjdump"))
        candidates += glob.glob(os.path.join(site, "triton", "backends", "nvidia", "bin", "cuobjdump"))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


def build(variant: str, precision: str, cache_folder: Path, overrides=()):
    """Compile one variant exactly as the cuda launcher does (same flags, same cache code).

    Returns (cubin path, nvcc/ptxas output text).
    """
    from gemmlab.backends import nvcc
    from gemmlab.backends.cuda_kernels import build_for
    from gemmlab.points import expand

    if nvcc.find_nvcc() is None:
        pytest.skip("nvcc not found")
    cfg = compose_cfg([f"variant={variant}", f"precision={precision}", "sizes=smoke", *overrides])
    point = expand(cfg)[0]
    kb = build_for(point, str(ROOT))
    assert "-gencode=arch=compute_90a,code=sm_90a" in kb.flags, kb.flags
    try:
        cubin = nvcc.compile_cubin(kb.source, kb.flags, cache_folder)
    except nvcc.CompileError as e:
        log = Path(e.log_path).read_text() if e.log_path else ""
        pytest.fail(f"{variant}/{precision} does not compile: {e}\n{log}")
    return cubin.path, Path(cubin.log_path).read_text()


def ptxas_numbers(report: str) -> dict:
    regs = re.search(r"Used (\d+) registers", report)
    stack = re.search(r"(\d+) bytes stack frame", report)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert regs and stack and spills, report
    return {"registers": int(regs.group(1)), "stack": int(stack.group(1)),
            "spill": int(spills.group(1)) + int(spills.group(2))}


def sass(cubin: Path) -> str:
    """cuobjdump -sass of ``cubin``, kept beside it (named by its size and mtime): the tests and
    workers that read one build's machine code disassemble it once."""
    st = Path(cubin).stat()
    kept = Path(f"{cubin}.{st.st_size}-{st.st_mtime_ns}.sass")
    if kept.is_file():
        return kept.read_text()
    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump here (install nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, or triton)")
    env = {**os.environ, "PATH": os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", "")}
    res = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, env=env)
    if res.returncode != 0 and "nvdisasm" in res.stderr:
        pytest.skip(f"cuobjdump found but not nvdisasm beside it: {res.stderr.strip()}")
    assert res.returncode == 0, res.stderr
    tmp = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
    tmp.write_text(res.stdout)
    os.replace(tmp, kept)  # whole or absent: another worker may read it
    return res.stdout


def opcodes(sass_text: str) -> list:
    """The opcode (with its modifiers) of every instruction, predicates stripped."""
    ops = []
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", sass_text):
        ops.append(m.group(1))
    return ops


def remote_arrives_fenced(ops: list) -> tuple:
    """(arrives on an mbarrier preceded within 4 instructions by MEMBAR.ALL.GPU, all arrives)."""
    arrives = [i for i, x in enumerate(ops) if x.startswith("SYNCS.ARRIVE.TRANS64.RED")]
    return sum("MEMBAR.ALL.GPU" in ops[max(0, i - 4):i] for i in arrives), len(arrives)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Every Hopper variant in bf16 (plus fp16 compiles: same code, other instruction type). In the
    session's nvcc cache (test_cuda_kernels.cubin_cache's): the same kernels as its compile test,
    and this module's fixtures run once per xdist worker."""
    out = session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")
    return {(v, prec): build(v, prec, out) for v in HOPPER_VARIANTS for prec in ("bf16", "fp16")}


@pytest.mark.slow
@pytest.mark.parametrize("variant", HOPPER_VARIANTS)
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_builds_for_sm90a_without_spills_or_warnings(builds, variant, precision):
    _, report = builds[(variant, precision)]
    nums = ptxas_numbers(report)
    assert nums["spill"] == 0 and nums["stack"] == 0, (variant, precision, nums, report)
    # C7508: setmaxnreg ignored; C7515-style: wgmma serialized. Any ptxas warning is a slow path.
    assert "warning" not in report.lower(), report
    assert nums["registers"] <= 255


@pytest.mark.slow
def test_sass_uses_the_tensor_core_path_each_stage_claims(builds):
    ops = {v: opcodes(sass(builds[(v, "bf16")][0])) for v in HOPPER_VARIANTS}
    for v, o in ops.items():
        assert not [x for x in o if x.startswith(("LDL", "STL"))], f"{v} touches local memory"
    mma = ops["mma_sync"]
    assert any(x.startswith("HMMA.16816.F32.BF16") for x in mma), "mma_sync has no HMMA m16n8k16"
    assert any(x.startswith("LDSM.16.MT88") for x in mma), "mma_sync has no ldmatrix.trans"
    assert any(x.startswith("LDGSTS") for x in mma), "mma_sync has no cp.async"
    assert not any(x.startswith("HGMMA") for x in mma)
    for v in ("wgmma_tma", "wgmma_ws"):
        assert any(x.startswith("HGMMA.64x256x16.F32.BF16") for x in ops[v]), f"{v} has no HGMMA"
        assert not any(x.startswith("HMMA") for x in ops[v]), f"{v} falls back to HMMA"
        assert any(x.startswith("UTMALDG.2D") for x in ops[v]), f"{v} has no TMA loads"
    ws = ops["wgmma_ws"]
    # 2-CTA clusters are the default, B multicast to both CTAs (CLUSTER_M=2 made explicit here)
    folder = Path(builds[("wgmma_ws", "bf16")][0]).parent
    clustered = opcodes(sass(build("wgmma_ws", "bf16", folder,
                                   ["variant.wgmma_ws.cuda.defines.CLUSTER_M=2"])[0]))
    assert any(x.startswith("UTMALDG.2D.MULTICAST") for x in clustered), "CLUSTER_M=2 does not multicast"
    # A slot goes back to the peer CTA with a CTA-scope remote arrive, as CUTLASS's pipelines do: with
    # release at cluster scope (MBAR_CLUSTER_SCOPE=1) ptxas fences every arrive with MEMBAR.ALL.GPU,
    # which cost the clustered kernel a third of its speed on the H200 (session5/tune_wgmma_ws).
    fenced = opcodes(sass(build("wgmma_ws", "bf16", folder, ["variant.wgmma_ws.cuda.defines.CLUSTER_M=2",
                                                              "variant.wgmma_ws.cuda.defines.MBAR_CLUSTER_SCOPE=1"])[0]))
    assert remote_arrives_fenced(clustered) == (0, 4), "remote arrives in the loop are fenced"
    assert remote_arrives_fenced(fenced) == (4, 4), "the cluster-scope control lost its fences"
    assert any(x.startswith("UTMASTG.2D") for x in ws), "wgmma_ws has no TMA store epilogue"
    assert any(x.startswith("STSM") for x in ws), "wgmma_ws has no stmatrix epilogue"
    assert {"USETMAXREG.DEALLOC.CTAPOOL", "USETMAXREG.TRY_ALLOC.CTAPOOL"} <= set(ws), "setmaxnreg missing"
    # The transposed-B bit is what makes row-major (N-contiguous) B correct.
    fp16_tma = opcodes(sass(builds[("wgmma_tma", "fp16")][0]))
    # fp16 is the default type: the SASS shows no type suffix (bf16 shows .BF16).
    assert "HGMMA.64x256x16.F32" in fp16_tma and "HGMMA.64x256x16.F32.BF16" not in fp16_tma
    assert "tnspB" in sass(builds[("wgmma_tma", "bf16")][0])


@pytest.mark.parametrize("variant", HOPPER_VARIANTS)
def test_shared_memory_of_the_default_config_fits_one_block(variant):
    from gemmlab.expr import evaluate
    from gemmlab.points import expand

    cfg = compose_cfg([f"variant={variant}", "precision=bf16", "sizes=smoke"])
    pt = expand(cfg)[0]
    smem = evaluate(cfg.variant[variant].cuda.smem_bytes, pt.expr_env())
    assert 48 * 1024 < smem <= SMEM_PER_BLOCK_MAX, smem
    block = [evaluate(b, pt.expr_env()) for b in cfg.variant[variant].cuda.block]
    assert block[0] % 128 == 0 and block[0] <= 1024, block


def test_tma_stages_skip_sizes_tma_cannot_stride_and_mma_sync_runs_them():
    from gemmlab.points import expand

    cfg = compose_cfg(["variant=[mma_sync,wgmma_tma,wgmma_ws]", "precision=[bf16,fp16]", "sizes=odd"])
    cfg.sizes.shapes = [[1000, 1000, 1000], [33, 65, 17], [64, 72, 8]]
    for p in expand(cfg):
        aligned = p.k % 8 == 0 and p.n % 8 == 0
        if p.variant == "mma_sync" or aligned:
            assert p.skip_reason is None, (p.variant, p.m, p.n, p.k, p.skip_reason)
        else:
            assert p.skip_reason and "TMA" in p.skip_reason, (p.variant, p.m, p.n, p.k)


class _FakeArray:
    """What tma.resolve reads from a CuPy array: shape, dtype, strides, data.ptr."""

    def __init__(self, rows, cols, dtype="bfloat16", ptr=1 << 20):
        import numpy as np

        try:
            import ml_dtypes  # noqa: F401

            self.dtype = np.dtype(dtype)
        except (ImportError, TypeError):
            self.dtype = np.dtype("float16") if dtype == "bfloat16" else np.dtype(dtype)
        self.shape = (rows, cols)
        self.strides = (cols * self.dtype.itemsize, self.dtype.itemsize)
        self.data = SimpleNamespace(ptr=ptr)


def _point(variant, m, n, k):
    from gemmlab.points import expand

    cfg = compose_cfg([f"variant={variant}", "precision=bf16", "sizes=smoke"])
    cfg.sizes.square = []
    cfg.sizes.shapes = [[m, n, k]]
    (p,) = expand(cfg)
    return p, cfg.variant[variant].cuda.tensor_maps


@pytest.mark.parametrize("variant", ["wgmma_tma", "wgmma_ws"])
def test_tensor_map_specs_resolve_to_what_the_kernel_expects(variant):
    from gemmlab.gpu import tma

    m, n, k = 1000, 264, 72
    p, specs = _point(variant, m, n, k)
    arrays = {"A": _FakeArray(m, k), "B": _FakeArray(k, n), "C": _FakeArray(m, n)}
    resolved = tma.resolve(p, arrays, specs)
    assert [s.operand for s in resolved] == (["A", "B"] if variant == "wgmma_tma" else ["A", "B", "C"])
    a, b = resolved[0], resolved[1]
    # A: K contiguous, box = BM rows x 64 (one 128-byte swizzle row); B: N contiguous, BK x 64.
    assert (a.rows, a.cols, a.row_stride_bytes, a.box_rows, a.box_cols) == (m, k, 2 * k, 128, 64)
    assert (b.rows, b.cols, b.row_stride_bytes, b.box_rows, b.box_cols) == (k, n, 2 * n, 64, 64)
    for s in resolved:
        tma.check(s)
        assert s.swizzle == 128 and s.box_cols * s.elem_bytes == 128
    # The expect_tx byte count in the kernels is the sum of the loaded boxes per stage.
    defines = p.variant_cfg.cuda.defines
    stage_bytes = defines.BM * defines.BK * 2 + defines.BK * defines.BN * 2
    assert a.box_bytes + (defines.BN // 64) * b.box_bytes == stage_bytes


def test_tensor_map_rules_reject_what_tma_cannot_encode():
    from gemmlab.gpu import tma

    p, specs = _point("wgmma_tma", 64, 72, 40)
    good = tma.resolve(p, {"A": _FakeArray(64, 40), "B": _FakeArray(40, 72), "C": _FakeArray(64, 72)}, specs)
    for s in good:
        tma.check(s)
    bad_cases = [
        (dict(row_stride_bytes=2 * 65), "row stride"),  # N = 65: rows not 16-byte aligned
        (dict(box_cols=128), "at most 128"),  # 256 B inner box with 128B swizzle
        (dict(box_rows=300), "must be in"),  # box dimension above 256
        (dict(swizzle=96), "swizzle must be"),
        (dict(address=(1 << 20) + 8), "16-byte aligned"),
        (dict(dtype="complex64"), "no TMA data type"),
    ]
    from dataclasses import replace

    for change, words in bad_cases:
        with pytest.raises(tma.TensorMapError, match=words):
            tma.check(replace(good[0], **change))
    with pytest.raises(tma.TensorMapError, match="operand"):
        tma.resolve(p, {}, [{"operand": "D", "box": [64, 64], "swizzle": 128}])


# ---- wgmma_ws (stage 12): the tuning sweep -------------------------------------------------------------
# Deltas from conf/variant/wgmma_ws.yaml's defines that one H200 run compares (tune_ws in
# .ci/h200-session.sh runs the same list); the first is the default. Every entry also runs through the host
# emulation (tests/test_hopper_emulation.py; clusters: the driver runs a cluster's blocks together), the default and
# the first unclustered entry at every emulated shape.
WS_SWEEP = [
    "{CLUSTER_M:2,GRID_CTAS:128,STAGES:4,EPI_BOXES:2}",
    "{CLUSTER_M:1,GRID_CTAS:0,STAGES:4,EPI_BOXES:2}",
    "{CLUSTER_M:1,GRID_CTAS:0,STAGES:3,EPI_BOXES:0}",
    "{CLUSTER_M:1,GRID_CTAS:0,EPI_TMA:0,STAGES:4}",
    "{GRID_CTAS:0}",
    "{MBAR_CLUSTER_SCOPE:1}",
    "{STAGES:3,EPI_BOXES:0}",
    "{EPI_BOXES:1}",
    "{GROUP_M:16}",
    "{GROUP_M:4}",
    "{EPI_TMA:0}",
    "{MAP_PARAMS:0}",  # the tensor maps in a device buffer (the defaults take them by value since session34c)
]


@pytest.mark.slow
@pytest.mark.parametrize("defines", WS_SWEEP)
def test_wgmma_ws_sweep_configurations_build_without_spills_and_keep_their_path(builds, defines):
    from gemmlab.expr import evaluate
    from gemmlab.points import expand

    over = [f"variant.wgmma_ws.cuda.defines={defines}"]
    cfg = compose_cfg(["variant=wgmma_ws", "precision=bf16", "sizes.square=[8192]", "sizes.shapes=[]", *over])
    (point,) = expand(cfg)
    assert point.skip_reason is None, point.skip_reason
    assert evaluate(cfg.variant.wgmma_ws.cuda.smem_bytes, point.expr_env()) <= SMEM_PER_BLOCK_MAX, defines
    cubin, report = build("wgmma_ws", "bf16", Path(builds[("wgmma_ws", "bf16")][0]).parent, over)
    nums = ptxas_numbers(report)
    assert nums["spill"] == 0 and nums["stack"] == 0 and nums["registers"] <= 255, (defines, nums)
    assert "warning" not in report.lower(), report
    ops = opcodes(sass(cubin))
    assert any(x.startswith("HGMMA.64x256x16.F32.BF16") for x in ops) and not [x for x in ops if x.startswith(("LDL", "STL"))]
    assert any(x.startswith("UTMASTG.2D") for x in ops) == ("EPI_TMA:0" not in defines), defines
    assert any(x.startswith("UTMALDG.2D.MULTICAST") for x in ops) == ("CLUSTER_M:1" not in defines), defines


# ---- wgmma_fp8 (stage 13): FP8 e4m3, both operands K-major (layout nt), per-tensor scales ------------
# The configurations one H200 tuning run compares (deltas from conf/variant/wgmma_fp8.yaml's defines;
# the first is the default); tune_fp8 in .ci/h200-session.sh runs the same list.
FP8_SWEEP = [
    "{EPI_BOXES:2,STAGES:4,EPI_TMA:1}",  # the default since h200-2026-12-06/session40f (issue 32: +1.9 / +2.1 points)
    "{STAGES:4,EPI_TMA:0}",
    "{STAGES:3,EPI_TMA:0}",
    "{GROUP_M:16}",
    "{BN:128,STAGES:4}",
    "{UNIFORM_A:1,DESC_STEP:1}",  # stage 15's issue-path defines (issue 32; session24b: within noise)
    # issue 32: the default before session40f (three stages, the staging tile's four boxes in one round); one box a
    # round; 2-CTA clusters with B multicast (stage 12's; a third fewer operand bytes a FLOP: under the 700 W cap at
    # 8192, fewer bytes, a higher clock), with three stages and with the default's
    "{STAGES:3,EPI_BOXES:0}",
    "{EPI_BOXES:1,STAGES:4}",
    "{CLUSTER_M:2,STAGES:3,EPI_BOXES:0}",
    "{CLUSTER_M:2,EPI_BOXES:2,STAGES:4}",
    "{MAP_PARAMS:0}",  # the tensor maps in a device buffer (the defaults take them by value since session34c)
]
# The default's SASS as the H200 measured it before session40f (session4's kernel; session24b's run at ec544dc; nvcc
# 13.0.88), and the builds of the sweep entries measured since, unchanged by the defines added after them: each with
# its tensor maps in the device buffer, as they were passed then (MAP_PARAMS 0; by value since session34c); then the
# default since session40f, as measured there
FP8_MEASURED_SASS = {
    "{STAGES:3,EPI_TMA:1,EPI_BOXES:0,MAP_PARAMS:0}": "8e31c80b5022914aef8ea4508d60d34127e8a45c2ddb45797c142b5555db29cc",
    "{STAGES:4,EPI_TMA:0,EPI_BOXES:0,MAP_PARAMS:0}": "66e0be25c86bae5646dda3f5897509e2e8dc9dea9e37854e03e761f5eb7ef775",
    "{BN:128,STAGES:4,EPI_BOXES:0,MAP_PARAMS:0}": "0ddf2afcb7816a0ba964952bcf3c8b3b9e1948fa01d9c113753cdfa8fbed3fda",
    "{UNIFORM_A:1,DESC_STEP:1,STAGES:3,EPI_BOXES:0,MAP_PARAMS:0}":
        "cb5f61917041cff58f375922d64c11f805616c7671dee7ee8d15b98e1326c7ae",
    # the default since session40f (commit c4732fe's build, measured there)
    "{}": "e483c2927461204ab4f4f022eb107c7b29e3a0641ff0ccfe66a4c805e9e58ce9",
}
FP8_BASE = ["variant=wgmma_fp8", "precision=fp8", "layouts=[nt]"]


def _fp8_overrides(defines):
    return [*FP8_BASE[2:], f"variant.wgmma_fp8.cuda.defines={defines}"]


@pytest.fixture(scope="module")
def fp8_builds(tmp_path_factory):
    out = session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")
    return {d: build("wgmma_fp8", "fp8", out, _fp8_overrides(d)) for d in [*FP8_SWEEP, *FP8_MEASURED_SASS]}


@pytest.mark.slow
@pytest.mark.parametrize("defines", FP8_SWEEP)
def test_fp8_sweep_configurations_build_without_spills_and_fit(fp8_builds, defines):
    from gemmlab.expr import evaluate
    from gemmlab.points import expand

    cfg = compose_cfg([*FP8_BASE, "sizes.square=[8192]", "sizes.shapes=[]", *_fp8_overrides(defines)])
    (point,) = expand(cfg)
    assert point.skip_reason is None, point.skip_reason
    smem = evaluate(cfg.variant.wgmma_fp8.cuda.smem_bytes, point.expr_env())
    assert smem <= SMEM_PER_BLOCK_MAX, (defines, smem)
    nums = ptxas_numbers(fp8_builds[defines][1])
    assert nums["spill"] == 0 and nums["stack"] == 0 and nums["registers"] <= 255, (defines, nums)
    assert "warning" not in fp8_builds[defines][1].lower(), fp8_builds[defines][1]


@pytest.mark.slow
def test_fp8_sass_is_e4m3_wgmma_fed_by_tma(fp8_builds):
    """ptxas names 8-bit wgmma QGMMA (HGMMA is the 16-bit one): .E4M3.E4M3 with K = 32."""
    for defines, (cubin, _) in fp8_builds.items():
        ops = opcodes(sass(cubin))
        bn = 128 if "BN:128" in defines else 256
        assert any(x.startswith(f"QGMMA.64x{bn}x32.F32.E4M3.E4M3") for x in ops), (defines, "no e4m3 QGMMA")
        assert not any(x.startswith(("HGMMA", "HMMA")) for x in ops), defines
        assert not [x for x in ops if x.startswith(("LDL", "STL"))], f"{defines} touches local memory"
        assert any(x.startswith("UTMALDG.2D") for x in ops), defines
        assert {"USETMAXREG.DEALLOC.CTAPOOL", "USETMAXREG.TRY_ALLOC.CTAPOOL"} <= set(ops), defines
        tma_store = "EPI_TMA:0" not in defines
        assert any(x.startswith("UTMASTG.2D") for x in ops) == tma_store, defines
        assert any(x.startswith("STSM") for x in ops) == tma_store, defines


def test_the_session_tunes_stage_13s_sweep():
    """.ci/h200-session.sh's tune_fp8 runs FP8_SWEEP (the same list, FP8_TUNE aside) at 4096 and 8192, cuBLASLt FP8
    interleaved."""
    text = (ROOT / ".ci" / "h200-session.sh").read_text()
    listed = re.search(r"\nFP8_SWEEP='([^']*)'", text).group(1)
    assert listed.split("},") == ",".join(FP8_SWEEP).split("},"), listed
    stage = re.search(r"\n  tune_fp8\)(.*?);;", text, re.S).group(1)
    assert 'fp8_tune tune_wgmma_fp8 "${FP8_TUNE:-$FP8_SWEEP}"' in stage, stage
    run = re.search(r"\nfp8_tune\(\) \{(.*?)\n\}", text, re.S).group(1)  # tune_fp8 and tune_fp8_repeat's command
    for words in ('"variant.wgmma_fp8.cuda.defines=$2"', '"sizes.square=[4096,8192]"', '"measure.baseline=[cublaslt]"'):
        assert words in run, words
    # the repeat: sets of the sweep, each twice
    repeat = re.search(r"\nFP8_REPEAT='([^']*)'", text).group(1).strip("{}").split("},{")
    assert set(repeat) <= set(listed.strip("{}").split("},{")) and len(repeat) == 2 * len(set(repeat)), repeat


@pytest.mark.slow
def test_fp8_default_is_the_measured_code_and_clusters_multicast_with_unfenced_releases(fp8_builds):
    """Stage 13's default, and the entries the H200 measured, compile to the SASS measured (the defines added after them
    change nothing at their off values); EPI_BOXES 2 stores each consumer's four boxes in two rounds of two; CLUSTER_M 2 multicasts B's half
    (UTMALDG.2D.MULTICAST), syncs the cluster at start and end (UCGABAR) and releases each slot to both CTAs with plain
    remote arrives (no MEMBAR.ALL.GPU before them: stage 12's lesson)."""
    from test_wgmma_ws_nt import sass_digest

    from gemmlab.backends import nvcc

    found = nvcc.find_nvcc()
    if found is None or nvcc.nvcc_version(found) != "13.0.88":
        pytest.skip(f"the recorded SASS is nvcc 13.0.88's (here: {found and nvcc.nvcc_version(found)})")
    for defines, digest in FP8_MEASURED_SASS.items():
        assert sass_digest(sass(fp8_builds[defines][0])) == digest, f"{defines} is no longer the code measured"
    for defines, (cubin, _) in fp8_builds.items():
        ops = opcodes(sass(cubin))
        clustered = "CLUSTER_M:2" in defines
        assert any(x.startswith("UTMALDG.2D.MULTICAST") for x in ops) == clustered, defines
        assert any(x.startswith("UCGABAR") for x in ops) == clustered, defines
        fenced, arrives = remote_arrives_fenced(ops)
        assert fenced == 0 and (arrives > 0) == clustered, (defines, fenced, arrives)
        stores = sum(x.startswith("UTMASTG.2D") for x in ops)
        # the TMA stores the consumer's thread 0 issues, unrolled: 4 boxes in one round, or EPI_BOXES a round
        boxes = 0 if "EPI_TMA:0" in defines else (2 if "BN:128" in defines else 4)
        assert stores == boxes, (defines, stores)
    assert sum(x.startswith("BAR.SYNC") for x in opcodes(sass(fp8_builds["{EPI_BOXES:2,STAGES:4,EPI_TMA:1}"][0]))) > \
        sum(x.startswith("BAR.SYNC") for x in opcodes(sass(fp8_builds["{STAGES:3,EPI_BOXES:0}"][0])))


# ---- mma_sync: the tuning sweep, its loop structure, and the kernel on the CPU ----------------------
# The configurations one H200 tuning run compares (deltas from conf/variant/mma_sync.yaml's
# defines). The first is the shape and loop structure of the kernel before fragment pipelining
# (128x256x64, 4 stages, fragments loaded just before their MMAs); the second is the default.
MMA_SYNC_SWEEP = [
    "{FRAG_PIPE:0}",
    "{FRAG_PIPE:1}",
    "{STAGES:3}",
    "{BM:256,BN:128}",
    "{BN:128,STAGES:3,MIN_BLOCKS:2}",
    "{BN:128,STAGES:3,MIN_BLOCKS:2,FRAG_PIPE:0}",
    "{BK:32,STAGES:6}",
    "{BN:128,BK:32,STAGES:6,MIN_BLOCKS:2}",
    "{BN:128,WN:32}",
    "{GROUP_M:16}",
    "{BK:32,STAGES:8}",
    "{BM:256,BN:128,STAGES:3}",
]


# The entries the CPU emulation runs (about 25 s each on a 2-core runner): every one that changes
# what the kernel computes or how its pipeline moves data. Left to the build test only: entries that
# differ from one emulated here by MIN_BLOCKS (a register budget) or GROUP_M (the launch order of
# blocks), {FRAG_PIPE:1}, the defaults' own value (test_mma_sync_fp16_and_eager_copies_on_the_cpu
# and the default stage's emulation run it), and the two that only combine emulated changes:
# {BK:32,STAGES:6} (BK 32: {BK:32,STAGES:8}; a ring that is no power of two: {STAGES:3}) and
# {BM:256,BN:128,STAGES:3} ({BM:256,BN:128} and {STAGES:3}).
MMA_SYNC_EMULATED = [d for d in MMA_SYNC_SWEEP if "MIN_BLOCKS" not in d and d not in
                     ("{GROUP_M:16}", "{FRAG_PIPE:1}", "{BK:32,STAGES:6}", "{BM:256,BN:128,STAGES:3}")]


def _mma_sync_overrides(defines):
    return [f"variant.mma_sync.cuda.defines={defines}"]


def _sass_loop_with_copies(sass_text: str):
    """The instructions of the innermost loop that issues cp.async (the fast path's k-tile loop):
    the body of a backward branch, as [(opcode, operands)]."""
    ins = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in
           re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)([^;]*);", sass_text)]
    loops = []
    for addr, op, rest in ins:
        target = re.search(r"0x([0-9a-f]+)", rest) if op == "BRA" else None
        if target and int(target.group(1), 16) < addr:
            body = [(o, r) for a, o, r in ins if int(target.group(1), 16) <= a < addr]
            if any(o.startswith("LDGSTS") for o, _ in body):
                loops.append(body)
    assert loops, "no loop issues cp.async (LDGSTS)"
    return min(loops, key=len)


@pytest.mark.slow
@pytest.mark.parametrize("defines", MMA_SYNC_SWEEP)
def test_mma_sync_sweep_configurations_build_without_spills(builds, defines):
    from gemmlab.points import expand

    cfg = compose_cfg(["variant=mma_sync", "precision=bf16", "sizes.square=[8192]", "sizes.shapes=[]",
                       *_mma_sync_overrides(defines)])
    (point,) = expand(cfg)
    assert point.skip_reason is None, point.skip_reason  # the YAML's rules accept it at N = 8192
    folder = Path(builds[("mma_sync", "bf16")][0]).parent
    _, report = build("mma_sync", "bf16", folder, _mma_sync_overrides(defines))
    nums = ptxas_numbers(report)
    assert nums["spill"] == 0 and nums["stack"] == 0 and nums["registers"] <= 255, (defines, nums)
    assert "warning" not in report.lower(), report


@pytest.mark.slow
def test_mma_sync_k_tile_loop_is_one_block_of_mma_ldmatrix_and_copies(builds):
    """The point of the rewrite: per k-tile, one barrier and no branch (the copies' addressing is set
    up before the loop), so ptxas can interleave copies, ldmatrix and MMAs freely."""
    d = compose_cfg(["variant=mma_sync", "precision=bf16", "sizes=smoke"]).variant.mma_sync.cuda.defines
    body = _sass_loop_with_copies(sass(builds[("mma_sync", "bf16")][0]))
    ops = [o for o, _ in body]
    count = lambda prefix: sum(o.startswith(prefix) for o in ops)  # noqa: E731
    # per k-tile and thread: BK/16 steps of (WM/16)x(WN/8) MMAs and WM/16 + WN/16 ldmatrix.x4; the
    # stage's (BM + BN) x BK 16-bit elements in 16-byte copies over all threads
    steps, threads = d.BK // 16, 32 * (d.BM // d.WM) * (d.BN // d.WN)
    mma, ldsm = steps * (d.WM // 16) * (d.WN // 8), steps * (d.WM // 16 + d.WN // 16)
    copies = (d.BM + d.BN) * d.BK * 2 // (16 * threads)
    assert (count("HMMA.16816.F32.BF16"), count("LDSM"), count("LDGSTS")) == (mma, ldsm, copies), ops
    assert count("BAR.SYNC") == 1 and count("BRA") == 0, ops
    overhead = len(ops) - mma - ldsm - copies
    assert overhead < mma, f"{overhead} other instructions per k-tile ({mma} MMAs)"


# An emulated run costs about the blocks times the k-tiles (every mma.sync and ldmatrix is two
# warp-wide barriers of the emulation), so the shapes are the smallest that still show each edge:
MMA_SYNC_EMULATED_SHAPES = [
    # 16-byte rows, the cp.async path: 2 x 2 blocks of 128 x 256 (blocks at m0 > 0 and n0 > 0), the
    # second row and column partial (1 row, 8 columns: the clamped copies); K = 4 x 64 + 8 =
    # 8 x 32 + 8: a partial first k-tile (8) and one k-tile more than the deepest ring emulated
    # (4 stages of BK 64, 8 of BK 32), so every configuration's ring wraps onto a stage in use
    (129, 264, 264),
    (257, 129, 72),  # N % 8 != 0: the element-wise path, two k-tiles (three of BK 32), odd N in the epilogue
]


UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def _defines_of(entry: str) -> dict:
    """A sweep entry's defines: "{BK:32,STAGES:6}" as {"BK": "32", "STAGES": "6"}."""
    return dict(item.split(":") for item in entry.strip("{}").split(",") if item)


def _element_wise_path_differs(entry: str) -> bool:
    """Whether the element-wise shape (the second) shows something for sweep entry ``entry`` that
    the default (test_mma_sync_fp16_and_eager_copies_on_the_cpu) or an earlier emulated entry does
    not: a difference in more than STAGES. At K = 72 (two k-tiles, three of BK 32) a ring of three
    or more stages never wraps, and the element-wise loads are plain stores, so STAGES only changes
    the count of empty commit groups there."""
    if int(_defines_of(entry).get("STAGES", 3)) < 3:
        return True  # two stages wrap there
    without_stages = lambda e: {k: v for k, v in _defines_of(e).items() if k != "STAGES"}  # noqa: E731
    before = MMA_SYNC_EMULATED[:MMA_SYNC_EMULATED.index(entry)]
    return all(without_stages(entry) != without_stages(e) for e in ["{}", *before])


def _emulate_mma_sync(tmp_path_factory, precision, overrides, shapes):
    import numpy as np
    from test_cuda_kernels import _inputs, emulate  # the host emulation harness

    from gemmlab.backends.cuda_kernels import build_for
    from gemmlab.points import expand

    if shutil.which("g++") is None:
        pytest.skip("g++ not found (host emulation)")
    folder = tmp_path_factory.mktemp("emu-mma-sync")
    rng = np.random.default_rng(5)
    points = []
    for m, n, k in shapes:
        cfg = compose_cfg(["variant=mma_sync", f"precision={precision}", "sizes.square=[]",
                           f"sizes.shapes=[[{m},{n},{k}]]", *overrides])
        (p,) = expand(cfg)
        assert p.skip_reason is None, p.skip_reason
        a, b = _inputs(p, rng)
        c = emulate(build_for(p), p, folder, a, b).astype(np.float64)
        assert not np.isnan(c).any(), f"{overrides}: {np.isnan(c).sum()} NaN in C at {m}x{n}x{k}"
        ref = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        # fp32 accumulation and one rounding to the 16-bit output give about 0.4 of the output's
        # unit roundoff; a lost k16 step or a misplaced fragment gives O(1)
        assert rel < UNIT_ROUNDOFF[p.out_dtype], f"{overrides} at {m}x{n}x{k}: rel_error {rel:.2e}"
        points.append(p)
    return points


@pytest.mark.slow
@pytest.mark.parametrize("defines", MMA_SYNC_EMULATED)
def test_mma_sync_sweep_configurations_compute_a_b_on_the_cpu(defines, tmp_path_factory):
    """Every sweep entry through the host emulation (warp-collective ldmatrix / mma.sync emulated,
    cp.async landing only at the wait that retires it): indexing, swizzles, the pipeline's waits and
    barriers, partial tiles and the element-wise path, checked against FP64 before any GPU time."""
    shapes = MMA_SYNC_EMULATED_SHAPES if _element_wise_path_differs(defines) else MMA_SYNC_EMULATED_SHAPES[:1]
    p = _emulate_mma_sync(tmp_path_factory, "bf16", _mma_sync_overrides(defines), shapes)[0]
    d = p.variant_cfg.cuda.defines
    assert -(-p.k // d.BK) > d.STAGES, f"{defines}: K = {p.k} does not wrap the ring; make the first shape's K longer"


@pytest.mark.slow
def test_mma_sync_fp16_and_eager_copies_on_the_cpu(tmp_path_factory):
    # (1, 8, 64): one row and one 16-byte chunk of C, a single k-tile (the prologue's empty groups)
    _emulate_mma_sync(tmp_path_factory, "fp16", [], MMA_SYNC_EMULATED_SHAPES + [(1, 8, 64)])
    # copies landing at issue instead: a stage overwritten while another warp still reads it shows
    _emulate_mma_sync(tmp_path_factory, "bf16", ["+variant.mma_sync.cuda.defines.GEMMLAB_EMU_EAGER_COPIES=1"],
                      MMA_SYNC_EMULATED_SHAPES[:1])


@pytest.mark.parametrize("defines,words", [
    ("{BN:128,STAGES:4,MIN_BLOCKS:2}", "must fit in an SM"),  # 2 x 128 KB
    ("{STAGES:5}", "must fit in an SM"),  # 240 KB for one 128x256x64 block
    ("{WN:48,BN:192}", "WN 16, 32 or 64"),
    ("{BK:16}", "BK must be 32 or 64"),
])
def test_mma_sync_rules_skip_configurations_that_cannot_run(defines, words):
    from gemmlab.points import expand

    cfg = compose_cfg(["variant=mma_sync", "precision=bf16", "sizes=smoke", *_mma_sync_overrides(defines)])
    for p in expand(cfg):
        assert p.skip_reason and words in p.skip_reason, (defines, p.skip_reason)
