"""The hand-written CUDA kernels and the ``cuda`` backend, without a GPU.

- every variant with ``backend: cuda`` (discovered from conf/variant) compiles for its arch with
  the local nvcc, with zero spills where its YAML says ``no_spill: true``;
- every kernels/cuda/*.cu starts with the header comment the project asks for;
- the kernels that need no inline PTX run on the CPU through a host emulation
  (kernels/cuda/common/host_emulation): the YAML's block/grid/smem rules launch them at odd
  and rectangular shapes, and the output must match an FP64 product everywhere and pass the
  element-wise check (gemmlab/measure/check.py) unless the kernel is wrong on purpose (an uncovered
  element stays NaN; an out-of-bounds access trips AddressSanitizer);
- nvcc's cache, ptxas parsing, compile failures with the log's path, kernel names.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, compose_cfg, session_folder
from omegaconf import OmegaConf

from gemmlab.backends import nvcc
from gemmlab.backends.cuda_kernels import (
    CudaKernels,
    KernelBuild,
    build_for,
    launch_shape,
)
from gemmlab.cache import locked
from gemmlab.variants import files as variant_files
from gemmlab.measure import check
from gemmlab.points import expand

# multiprocessors of the device the CPU-side launch rules are evaluated for (an H200)
TEST_SM_COUNT = 132

KERNELS = ROOT / "kernels" / "cuda"
EMULATION = KERNELS / "common" / "host_emulation"
ALL_PRECISIONS = "[fp64,fp32,tf32,fp16,bf16,fp8]"
NEEDS_NVCC = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found on this machine")
NEEDS_GXX = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found (host emulation)")


# ---- discovery ---------------------------------------------------------------------------------
def cuda_variant_names():
    from gemmlab import variants  # its YAML reads are cached: collection reads each file once

    return [v.name for v in variants.all_info() if v.backend == "cuda"]


@functools.lru_cache(maxsize=None)
def all_cuda_cfg():
    names = ",".join(cuda_variant_names())
    return compose_cfg([f"variant=[{names}]", f"precision={ALL_PRECISIONS}", "sizes=smoke"])


@functools.lru_cache(maxsize=None)
def points_at(m, n, k, overrides=()):
    cfg = compose_cfg([f"variant=[{','.join(cuda_variant_names())}]", f"precision={ALL_PRECISIONS}",
                       "sizes.square=[]", f"sizes.shapes=[[{m},{n},{k}]]", *overrides])
    return expand(cfg)


@functools.lru_cache(maxsize=None)
def points_by_shape(shapes: tuple) -> dict:
    """points_at of each of ``shapes``, from one compose (one of every cuda variant costs a CPU-second)."""
    listed = ",".join(f"[{m},{n},{k}]" for m, n, k in shapes)
    cfg = compose_cfg([f"variant=[{','.join(cuda_variant_names())}]", f"precision={ALL_PRECISIONS}",
                       "sizes.square=[]", f"sizes.shapes=[{listed}]"])
    out = {shape: [] for shape in shapes}
    for p in expand(cfg):
        out[(p.m, p.n, p.k)].append(p)
    return out


@functools.lru_cache(maxsize=None)
def distinct_builds():
    """(variant, precision, KernelBuild) for every supported precision of every cuda variant."""
    seen, out = set(), []
    for p in expand(all_cuda_cfg()):
        if p.precision not in p.variant_cfg.precisions:
            continue
        b = build_for(p)
        if b not in seen:
            seen.add(b)
            out.append((p.variant, p.precision, b, p.variant_cfg))
    return out


def test_discovery_finds_the_ladder():
    names = cuda_variant_names()
    assert len(names) >= 10, names  # 7 stages and 3 pitfall variants at least
    cfg = all_cuda_cfg()
    for name in names:
        v = cfg.variant[name]
        assert v.cuda is not None and (ROOT / v.cuda.source).is_file(), f"{name}: no source {v.cuda.source}"
        assert v.precisions, f"{name} lists no precision"


# ---- every variant compiles ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def cubin_cache(tmp_path_factory):
    """nvcc's cache (keyed on the sources and flags, locked per cubin), one for the session: a
    kernel this file, test_hopper_kernels.py's builds or another xdist worker compiled is a hit."""
    return session_folder(tmp_path_factory.getbasetemp(), "cuda-cache")


@pytest.mark.slow
@NEEDS_NVCC
@pytest.mark.parametrize("variant,precision,build,vcfg", distinct_builds(),
                         ids=[f"{v}-{p}" for v, p, _b, _c in distinct_builds()])
def test_every_cuda_variant_compiles_for_its_arch(variant, precision, build, vcfg, cubin_cache):
    cubin = nvcc.compile_cubin(build.source, build.flags, cubin_cache)
    assert cubin.path.is_file() and cubin.path.stat().st_size > 0
    report = cubin.report(build.entry)  # the entry exists and ptxas reported it
    assert report.registers > 0
    if vcfg.cuda.no_spill:
        assert report.spill_bytes == 0, (
            f"{build.kernel_name} ({precision}) spills: {report.spill_store_bytes} B stored, "
            f"{report.spill_load_bytes} B loaded; see {cubin.log_path}")


# ---- headers ----------------------------------------------------------------------------------
def header_comment(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if line.startswith("//"):
            lines.append(line[2:].strip())
        elif line.strip() == "" and not lines:
            continue
        else:
            break
    return "\n".join(lines)


@pytest.mark.parametrize("source", sorted(KERNELS.glob("*.cu")), ids=lambda p: p.name)
def test_every_kernel_starts_with_its_header_comment(source):
    text = header_comment(source).lower()
    assert len(text.splitlines()) >= 5, f"{source.name}: begin with a // header comment"
    for what in ("change", "constraint", "intensity", "python run.py"):
        assert what in text, (f"{source.name}: the header comment should say what it changes, its "
                              f"constraints, its modeled intensity and how to run it; no {what!r}")


def test_every_cuda_variant_states_its_modeled_intensity():
    for p in expand(all_cuda_cfg()):
        if p.precision in p.variant_cfg.precisions and p.variant_cfg.intensity_model is not None:
            assert p.intensity_model > 0
    cfg = all_cuda_cfg()
    missing = [n for n in cuda_variant_names() if cfg.variant[n].intensity_model is None]
    assert not missing, f"variants without intensity_model: {missing}"


def test_modeled_intensities_are_the_chapters():
    """Naive 0.25 FLOP/B, shared tile T/4, 128 x 128 block tile 32 (FP32); WMMA 16/2 = 8."""
    def model(variant, precision, *overrides):
        cfg = compose_cfg([f"variant={variant}", f"precision={precision}", "sizes=smoke", *overrides])
        return expand(cfg)[0].intensity_model

    assert model("naive", "fp32") == pytest.approx(0.25)
    assert model("smem_tiled", "fp32") == pytest.approx(8.0)
    assert model("smem_tiled", "fp32", "variant.smem_tiled.cuda.defines.TILE=16") == pytest.approx(4.0)
    for v in ("register_blocked", "double_buffered", "warp_tiled"):
        assert model(v, "fp32") == pytest.approx(32.0)
    assert model("wmma", "fp16") == pytest.approx(8.0)
    assert model("wmma_tiled", "fp16") == pytest.approx(64.0)


def test_pitfalls_stay_out_of_the_default_sweep():
    default = compose_cfg(["sizes=smoke"]).variant
    for name in ("smem_tiled_colread", "smem_tiled_colread_padded", "smem_tiled_nosync"):
        assert name not in default
    for name in ("naive", "smem_tiled", "register_blocked", "double_buffered", "wmma", "wmma_tiled", "warp_tiled"):
        assert name in default


# ---- launch rules, run on the CPU ---------------------------------------------------------------
# Odd and rectangular shapes: partial tiles on every edge, the scalar and the vector load paths
# (N % 8 == 0 and K % 8 == 0 at 130 x 200 x 40), multiples of 16 and 32 for the variants that
# require them (the chapter's wmma and sgemm32), M = 1 and N = 1.
EMULATED_SHAPES = [(33, 65, 17), (130, 200, 40), (64, 96, 32), (1, 70, 37), (150, 1, 20)]
_EMU_C = {"double": "float64", "float": "float32", "__half": "float16", "__nv_bfloat16": "bfloat16"}


def emulatable(build: KernelBuild, vcfg) -> bool:
    """Kernels without inline PTX, TMA or arch-specific features run in the host emulation (the
    conduct controls, which write outside C or never end on purpose, in tests/test_conduct_controls.py)."""
    text = build.source.read_text()
    return ("conduct_control" not in (vcfg.get("tags") or []) and not vcfg.cuda.tensor_maps and not build.arch.endswith("a")
            and re.search(r"\basm\b", text) is None and dict(build.defines).get("TIN") in _EMU_C)


def wrong_on_purpose(build: KernelBuild) -> bool:
    return "wrong on purpose" in header_comment(build.source).lower()


EMULATED = [(v, p, b) for v, p, b, c in distinct_builds() if emulatable(b, c)]


# -g1 (line tables) is what AddressSanitizer's reports need for file:line; full -g made every
# host build about a quarter slower (the builds are most of this file's time on a 2-core runner).
HOST_FLAGS = ("-std=c++20", "-O1", "-g1", "-pthread", "-fsanitize=address", "-fno-omit-frame-pointer", "-w",
              "-DGEMMLAB_HOST_EMULATION", "-include", "cuda_shim.h", f"-I{EMULATION}", f"-I{KERNELS}")


@functools.lru_cache(maxsize=None)
def precompiled_shim(folder: str) -> Path:
    """A folder holding cuda_shim.h precompiled with HOST_FLAGS (about a second of every host
    build is that header and the standard headers it includes), once per session. Put first on
    the include path, g++ takes cuda_shim.h.gch for ``-include cuda_shim.h`` where it is valid for
    the build (same flags; GCC checks) and reads the header itself otherwise."""
    pch = session_folder(Path(folder), "emulators") / "pch"
    pch.mkdir(exist_ok=True)
    gch = pch / "cuda_shim.h.gch"
    with locked(gch):
        if not gch.is_file():
            tmp = pch / f"cuda_shim.{os.getpid()}.tmp.gch"
            flags = [f for f in HOST_FLAGS if f not in ("-include", "cuda_shim.h")]
            r = subprocess.run(["g++", *flags, "-x", "c++-header", str(EMULATION / "cuda_shim.h"), "-o", str(tmp)],
                               capture_output=True, text=True)
            if r.returncode == 0:  # else no .gch: the builds parse the header (and report its errors)
                os.replace(tmp, gch)
    return pch


# Compiled once per session and linked into every emulator: no kernel's macros reach them.
# driver.cpp: main, the block scheduler, the fibers (its standard-library templates were three
# quarters of each build's CPU time when every build compiled it again); hopper_emu.cpp: the Hopper
# emulation's mbarriers, TMA, stmatrix, wgmma queues and named barriers (two thirds of the code a
# Hopper stage's build generated; stages without them link it and use none of it); cp_async_emu.cpp:
# mma_sync_ptx.h's cp.async queues (stages 10, 14, 16).
EMULATION_OBJECTS = ("driver.cpp", "hopper_emu.cpp", "cp_async_emu.cpp")


@functools.lru_cache(maxsize=None)
def emulation_object(folder: str, source: str) -> Path:
    """``source`` (one of EMULATION_OBJECTS) compiled with HOST_FLAGS into an object, once per
    session. Named by a hash of the command and of the emulation's sources, in the folder the workers
    share, under a lock, written whole or not at all (as emulator())."""
    pch = precompiled_shim(folder)
    cmd = ["g++", f"-I{pch}", *HOST_FLAGS, "-c", str(EMULATION / source)]
    key = hashlib.sha256("\0".join(cmd).encode())
    for file in sorted(EMULATION.iterdir()):
        if file.suffix in (".h", ".cpp"):
            key.update(b"\0" + file.name.encode() + b"\0" + file.read_bytes())
    stem = Path(source).stem
    return built_once(session_folder(Path(folder), "emulators") / f"{stem}-{key.hexdigest()[:20]}.o", cmd, source)


def built_once(target: Path, cmd: list[str], what: str) -> Path:
    """``cmd`` (less its -o) run into ``target`` unless a worker has already: under a lock, written to
    a temporary name and renamed, so the file is whole or absent (another worker may be waiting)."""
    with locked(target):
        if not target.is_file():
            tmp = target.with_name(f"{target.stem}.{os.getpid()}.tmp{target.suffix}")
            r = subprocess.run([*cmd, "-o", str(tmp)], capture_output=True, text=True)
            assert r.returncode == 0, f"host build of {what} failed:\n{r.stderr[-3000:]}"
            os.replace(tmp, target)
    return target


def emulator_command(folder: str, defines: list[str], source: Path, entry: str) -> list[str]:
    """The g++ command (less -o) of a host-emulation executable: launch.cpp with the kernel's
    ``source``, ``entry`` and ``defines`` (TIN and TOUT among them, KERNEL_ARGS where the kernel
    takes more than A, B, C, M, N, K), linked with the EMULATION_OBJECTS."""
    return ["g++", f"-I{precompiled_shim(folder)}", *HOST_FLAGS, *defines, f'-DKERNEL_SOURCE="{source}"',
            f"-DKERNEL_ENTRY={entry}", str(EMULATION / "launch.cpp"),
            *(str(emulation_object(folder, o)) for o in EMULATION_OBJECTS)]


@functools.lru_cache(maxsize=None)
def emulator(build: KernelBuild, folder: str, kernel_args: str = "") -> Path:
    """The host-emulation executable of ``build`` (launch.cpp and driver.cpp; ``kernel_args``: the
    KERNEL_ARGS of launch.cpp, for kernels that take more than A, B, C, M, N, K). Built once per
    session: named by a hash of the g++ command, in a folder every xdist worker shares (``folder``
    is the worker's basetemp), under a lock, so the launch-rule tests, the negative controls and
    each Hopper stage's shapes and negative test reuse one build."""
    defines = sorted(nvcc.define_flags(build.defines))  # the order of -D flags changes nothing
    if kernel_args:
        defines.append(f"-DKERNEL_ARGS={kernel_args}")
    cmd = emulator_command(folder, defines, build.source, build.entry)
    key = hashlib.sha256("\0".join(cmd).encode()).hexdigest()[:20]
    return built_once(session_folder(Path(folder), "emulators") / f"{build.source.stem}-{key}", cmd, build.kernel_name)


def emulate(build: KernelBuild, point, folder: Path, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    shape = launch_shape(point, sm_count=TEST_SM_COUNT)
    a.tofile(folder / "a.bin")
    b.tofile(folder / "b.bin")
    exe = emulator(build, str(folder.parent))
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=0"}
    r = subprocess.run([str(exe), str(point.m), str(point.n), str(point.k), *map(str, shape.grid),
                        *map(str, shape.block), str(shape.smem_bytes), str(folder / "a.bin"),
                        str(folder / "b.bin"), str(folder / "c.bin")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, (f"{build.kernel_name} at {point.m}x{point.n}x{point.k} with grid {shape.grid}, "
                               f"block {shape.block}, smem {shape.smem_bytes}: exit {r.returncode}\n{r.stderr[-4000:]}")
    return np.fromfile(folder / "c.bin", dtype=np.dtype(point.out_dtype)).reshape(point.m, point.n)


def _inputs(point, rng):
    from gemmlab.dtypes import numpy_dtype

    if point.in_dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 inputs need ml_dtypes")

    dt = numpy_dtype(point.in_dtype)
    a = rng.standard_normal((point.m, point.k), dtype=np.float32).astype(dt)
    b = rng.standard_normal((point.k, point.n), dtype=np.float32).astype(dt)
    return a, b


@NEEDS_GXX
@pytest.mark.slow
@pytest.mark.parametrize("variant,precision,build", EMULATED, ids=[f"{v}-{p}" for v, p, _b in EMULATED])
def test_launch_rules_cover_c_and_kernels_compute_a_b_on_the_cpu(variant, precision, build, tmp_path_factory):
    folder = tmp_path_factory.mktemp("emu")
    rng = np.random.default_rng(0)
    ran = 0
    for m, n, k in EMULATED_SHAPES:
        pts = [p for p in points_by_shape(tuple(EMULATED_SHAPES))[(m, n, k)]
               if p.variant == variant and p.precision == precision]
        assert len(pts) == 1
        p = pts[0]
        if p.skip_reason:  # the variant's `requires` (e.g. wmma's multiples of 16) rule it out
            assert "requires" in p.skip_reason
            continue
        a, b = _inputs(p, rng)
        c = emulate(build, p, folder, a, b).astype(np.float64)
        assert not np.isnan(c).any(), f"{np.isnan(c).sum()} elements of C never written at {m}x{n}x{k}"
        if wrong_on_purpose(build):
            continue
        ref = a.astype(np.float64) @ b.astype(np.float64)
        rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        assert rel < 1e-5, f"{build.kernel_name} at {m}x{n}x{k}: rel_error {rel:.2e}"
        res = check.Reference.gemm(np, a, b, check.model_of(p), p.tolerance, p.out_dtype).verify(c)
        assert res.passed, (f"{build.kernel_name} ({precision}) at {m}x{n}x{k} fails the element-wise check: "
                            f"{res.failure()} (check_elem_max {res.elem_max:.3g}, check_elem_fail "
                            f"{res.elem_fail}, rel_error {res.rel_error:.3g})")
        ran += 1
    if not ran and not wrong_on_purpose(build):
        pytest.skip(f"{variant}: its `requires` rule out every shape of EMULATED_SHAPES; add one it takes")


@NEEDS_GXX
@pytest.mark.slow
def test_emulation_catches_a_launch_rule_that_leaves_c_uncovered(tmp_path_factory):
    """The CPU check above can fail: a grid one block short leaves NaN in C."""
    folder = tmp_path_factory.mktemp("emu-neg")
    over = ('variant.smem_tiled.cuda.grid=["cdiv(n, TILE) - 1","cdiv(m, TILE)",1]',)
    p = next(p for p in points_at(70, 70, 20, over) if p.variant == "smem_tiled" and p.precision == "fp32")
    a, b = _inputs(p, np.random.default_rng(1))
    c = emulate(build_for(p), p, folder, a, b)
    assert np.isnan(c).any()


@NEEDS_GXX
@pytest.mark.slow
def test_emulation_refuses_less_shared_memory_than_the_kernel_declares(tmp_path_factory):
    folder = tmp_path_factory.mktemp("emu-smem")
    over = ("variant.warp_tiled.cuda.smem_bytes=1024",)
    p = next(p for p in points_at(40, 40, 16, over) if p.variant == "warp_tiled" and p.precision == "fp32")
    a, b = _inputs(p, np.random.default_rng(2))
    with pytest.raises(AssertionError, match="exit 3"):
        emulate(build_for(p), p, folder, a, b)


# ---- the backend without a device ----------------------------------------------------------------
def point_of(variant, precision, m=33, n=65, k=17, overrides=(), tmp_path=None):
    cfg = compose_cfg([f"variant={variant}", f"precision={precision}", "sizes.square=[]",
                       f"sizes.shapes=[[{m},{n},{k}]]", *overrides], tmp_path)
    return cfg, expand(cfg)[0]


def test_kernel_name_carries_the_defines():
    _, p = point_of("smem_tiled", "fp32", overrides=["variant.smem_tiled.cuda.defines.TILE=16"])
    assert build_for(p).kernel_name == "smem_tiled<TILE=16>"
    assert ("TIN", "float") in build_for(p).defines and ("TOUT", "float") in build_for(p).defines
    _, p = point_of("wmma_tiled", "bf16")
    assert ("TIN", "__nv_bfloat16") in build_for(p).defines and ("TOUT", "float") in build_for(p).defines


def test_launch_shape_follows_the_yaml():
    _, p = point_of("smem_tiled", "fp32", 1000, 1023, 4097, ["variant.smem_tiled.cuda.defines.TILE=8"])
    s = launch_shape(p, sm_count=TEST_SM_COUNT)
    assert s.block == (8, 8, 1) and s.grid == (128, 125, 1) and s.smem_bytes == 0
    _, p = point_of("warp_tiled", "fp32", 4096, 1, 4096)
    s = launch_shape(p, sm_count=TEST_SM_COUNT)
    assert s.grid == (1, 32, 1) and s.smem_bytes > 48 * 1024  # opts in to more than 48 KiB


def test_arch_flags():
    assert nvcc.arch_flags("sm_90") == ["-arch=sm_90"]
    assert nvcc.arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(ValueError):
        nvcc.arch_flags("90")


def fake_toolkit(root: Path, executable: bool = True) -> Path:
    """``root``/bin/nvcc: a file standing in for a toolkit's compiler (find_nvcc never runs it)."""
    (root / "bin").mkdir(parents=True)
    path = root / "bin" / "nvcc"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def test_find_nvcc_takes_a_named_toolkit_before_the_path(tmp_path, monkeypatch):
    """One order for the cuda and cutlass backends: $CUDA_INSTALL_PATH, $CUDA_HOME, $CUDA_PATH,
    the PATH, /usr/local/cuda; only executable files count."""
    on_path, home, cuda_path, install, default = (
        fake_toolkit(tmp_path / name) for name in ("on_path", "home", "cuda_path", "install", "default"))
    for var in nvcc.CUDA_ROOT_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(nvcc, "DEFAULT_CUDA_ROOTS", (str(default.parent.parent),))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert nvcc.find_nvcc() == str(default)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert nvcc.find_nvcc() == str(on_path)
    monkeypatch.setenv("CUDA_PATH", str(cuda_path.parent.parent))
    assert nvcc.find_nvcc() == str(cuda_path)
    monkeypatch.setenv("CUDA_HOME", str(home.parent.parent))
    assert nvcc.find_nvcc() == str(home)
    monkeypatch.setenv("CUDA_INSTALL_PATH", str(install.parent.parent))
    assert nvcc.find_nvcc() == str(install)
    assert nvcc.nvcc_candidates() == [install, home, cuda_path, on_path, default]
    install.chmod(0o644)  # not executable: skipped
    assert nvcc.find_nvcc() == str(home)
    monkeypatch.setattr(nvcc, "DEFAULT_CUDA_ROOTS", ())
    for var in nvcc.CUDA_ROOT_VARS:
        monkeypatch.delenv(var)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert nvcc.find_nvcc() is None
    with pytest.raises(nvcc.NvccError, match="nvcc not found.*CUDA_INSTALL_PATH.*PATH"):
        nvcc.compile_cubin(tmp_path / "k.cu", [], tmp_path / "cache")


def test_unavailable_names_nvcc_when_it_is_missing(monkeypatch):
    cfg, _ = point_of("naive", "fp32")
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: None)
    reason = CudaKernels(cfg).unavailable()
    assert reason and "nvcc" in reason


PTXAS_SAMPLE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'good' for 'sm_90'
ptxas info    : Function properties for good
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 16640 bytes smem
ptxas info    : Compile time = 36.505 ms
ptxas info    : Compiling entry function 'spilly' for 'sm_90'
ptxas info    : Function properties for spilly
    40 bytes stack frame, 36 bytes spill stores, 32 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 40 bytes cumulative stack size
"""


def test_parse_ptxas():
    r = nvcc.parse_ptxas(PTXAS_SAMPLE)
    assert r["good"] == nvcc.PtxasReport(registers=128, smem_bytes=16640, barriers=1)
    assert r["spilly"].registers == 255 and r["spilly"].smem_bytes == 0
    assert r["spilly"].spill_bytes == 68 and r["spilly"].stack_frame_bytes == 40


GOOD_KERNEL = """// a test kernel
#include "hdr.cuh"
extern "C" __global__ void k(const float* A, const float* B, float* C, int M, int N, int K) {
    C[threadIdx.x] = A[threadIdx.x] * SCALE + B[threadIdx.x];
}
"""


@NEEDS_NVCC
def test_compile_cache_hits_and_keys_on_source_headers_and_flags(tmp_path):
    (tmp_path / "hdr.cuh").write_text("#define SCALE 2.0f\n")
    src = tmp_path / "k.cu"
    src.write_text(GOOD_KERNEL)
    cache = tmp_path / "cache"
    flags = nvcc.build_flags("sm_90")
    first = nvcc.compile_cubin(src, flags, cache)
    assert first.compile_s > 0 and first.reports["k"].registers > 0
    assert (cache / f"k-{first.key}.ptxas.json").is_file() and first.log_path.is_file()
    again = nvcc.compile_cubin(src, flags, cache)
    assert again.compile_s == 0.0 and again.path == first.path and again.reports == first.reports
    assert nvcc.compile_cubin(src, nvcc.build_flags("sm_90", [("X", 1)]), cache).key != first.key
    (tmp_path / "hdr.cuh").write_text("#define SCALE 3.0f\n")  # an included header changed
    assert nvcc.compile_cubin(src, flags, cache).key != first.key


@NEEDS_NVCC
def test_a_broken_kernel_fails_only_its_points_with_the_log_path(tmp_path):
    bad = tmp_path / "broken.cu"
    bad.write_text('// broken on purpose\nextern "C" __global__ void broken(const float* A) { this is not C++; }\n')
    with pytest.raises(nvcc.CompileError) as err:
        nvcc.compile_cubin(bad, nvcc.build_flags("sm_90"), tmp_path / "cache")
    assert err.value.log_path and err.value.log_path.is_file()
    assert str(err.value.log_path) in str(err.value) and "error" in err.value.log_path.read_text()

    # through the backend: prepare() records the failure, make_launch() raises it for that point only
    over = [f"variant.naive.cuda.source={bad}", "variant.naive.cuda.entry=broken", f"paths.cache={tmp_path / 'c'}"]
    cfg, broken = point_of("naive", "fp32", overrides=over, tmp_path=tmp_path)
    cfg2, good = point_of("smem_tiled", "fp32", overrides=[f"paths.cache={tmp_path / 'c'}"], tmp_path=tmp_path)
    backend = CudaKernels(cfg)
    backend.prepare([broken, good])  # does not raise
    with pytest.raises(nvcc.CompileError, match=re.escape(str(tmp_path / "c"))) as err:
        backend.make_launch(broken, None, None, None)
    assert ".log" in str(err.value)
    assert backend.cubin_for(build_for(good)).path.is_file()


# ---- the warp_tiled tuning sweep (conf/variant/warp_tiled.yaml's header) ---------------------------
WARP_TILED_SWEEP = ["{STAGES:2}", "{STAGES:4}", "{BK:8,STAGES:4}", "{BK:32,STAGES:3}", "{WM:32,WN:64}",
                    "{THREADS:128,WN:64,WNITER:4}", "{BN:256,WN:64,WNITER:4,MIN_BLOCKS:1}"]


@NEEDS_NVCC
@NEEDS_GXX
@pytest.mark.slow
@pytest.mark.parametrize("defines", WARP_TILED_SWEEP)
def test_warp_tiled_sweep_configurations_build_without_spills_and_compute_a_b(defines, cubin_cache,
                                                                              tmp_path_factory):
    folder = tmp_path_factory.mktemp("emu-sweep")
    rng = np.random.default_rng(3)
    # the two shapes in one composed config of warp_tiled alone (points_at composes every cuda
    # variant in every precision, per shape)
    cfg = compose_cfg(["variant=warp_tiled", "precision=fp32", "sizes.square=[]",
                       "sizes.shapes=[[130,300,40],[257,129,33]]", f"variant.warp_tiled.cuda.defines={defines}"])
    pts = expand(cfg)
    assert [(p.m, p.n, p.k) for p in pts] == [(130, 300, 40), (257, 129, 33)]
    for p in pts:
        m, n, k = p.m, p.n, p.k
        assert p.skip_reason is None, p.skip_reason
        build = build_for(p)
        report = nvcc.compile_cubin(build.source, build.flags, cubin_cache).report(build.entry)
        assert report.spill_bytes == 0, f"{build.kernel_name} spills {report.spill_bytes} B"
        a, b = _inputs(p, rng)
        c = emulate(build, p, folder, a, b).astype(np.float64)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-5, f"{build.kernel_name} at {m}x{n}x{k}"


def test_warp_tiled_rules_skip_an_inconsistent_configuration():
    p = next(p for p in points_at(64, 64, 64, ("variant.warp_tiled.cuda.defines={THREADS:128}",))
             if p.variant == "warp_tiled" and p.precision == "fp32")
    assert p.skip_reason and "THREADS must be one warp per" in p.skip_reason


@NEEDS_NVCC
def test_precompile_fills_the_cache_a_run_then_hits(tmp_path, monkeypatch):
    """python -m gemmlab.bench.precompile compiles what a run needs; the run's compile then costs 0 s."""
    from gemmlab.bench import precompile

    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))
    args = ["variant=[smem_tiled]", "precision=fp32", "sizes=smoke", "variant.smem_tiled.cuda.defines.TILE=8"]
    assert precompile.main(["--out", str(tmp_path / "logs"), *args]) == 0
    cfg = compose_cfg(args)
    (p,) = {build_for(p): p for p in expand(cfg)}.values()
    again = nvcc.compile_cubin(build_for(p).source, build_for(p).flags, Path(cfg.paths.cache) / "cuda")
    assert again.compile_s == 0.0


def test_a_stage_number_is_the_same_in_its_yaml_file_name_and_header():
    """The YAML's `stage` is the number; the file prefix and the header's "Stage N:" must agree."""
    from gemmlab import variants

    staged = [v for v in variants.all_info() if v.stage is not None and v.backend == "cuda"]
    assert len(staged) >= 10
    for v in staged:
        source = ROOT / OmegaConf.load(v.path).cuda.source
        assert int(source.name.split("_", 1)[0]) == v.stage, (v.name, source.name)
        first = source.read_text().splitlines()[0]
        assert first.startswith(f"// Stage {v.stage}:"), (v.name, first)
