"""The raw cuBLASLt call for measure.fp8_scaling=rowcol|block (gemmlab/backends/cublaslt_scaled.py),
checked on the CPU with nvmath's bindings replaced by a fake that records every call and reads each
attribute back from the buffer it was handed: which attributes get which values, the layouts, the
scale arrays' shapes and memory order, the order of cublasLtMatmul's arguments, the skips. The
enum values and attribute types are nvmath-python 1.0.0's (nvmath.bindings.cublasLt, read from its
wheel) = cuBLAS 12.9+'s headers. What only the H200 can show is in tests/test_gpu_fp8_scaling.py."""
from __future__ import annotations

import ctypes
import enum
import sys
import types

import numpy as np
import pytest
from conftest import compose_cfg

from gemmlab import fp8
from gemmlab.backends import cublaslt_scaled as scaled
from gemmlab.points import expand

# nvmath-python 1.0.0, nvmath.bindings.cublasLt
DESC = {"COMPUTE_TYPE": 0, "SCALE_TYPE": 1, "POINTER_MODE": 2, "TRANSA": 3, "TRANSB": 4, "EPILOGUE": 7,
        "A_SCALE_POINTER": 17, "B_SCALE_POINTER": 18, "D_SCALE_POINTER": 20, "FAST_ACCUM": 25,
        "A_SCALE_MODE": 31, "B_SCALE_MODE": 32, "D_SCALE_MODE": 34}
DESC_TYPES = {3: np.int32, 4: np.int32, 17: np.int64, 18: np.int64, 31: np.int32, 32: np.int32}
PREF = {"MAX_WORKSPACE_BYTES": 1, "REDUCTION_SCHEME_MASK": 3}
PREF_TYPES = {1: np.uint64, 3: np.uint32}
SCALE = {"SCALAR_32F": 0, "VEC16_UE4M3": 1, "VEC32_UE8M0": 2, "OUTER_VEC_32F": 3, "VEC128_32F": 4,
         "BLK128x128_32F": 5, "PER_BATCH_SCALAR_32F": 6}
HEURISTIC_DTYPE = np.dtype([("algo", [("data_", "<u8", (8,))]), ("workspace_size", "<u8"), ("state", "<i4"),
                            ("waves_count", "<f4"), ("reserved", "<i4", (4,))])


class FakeLt(types.SimpleNamespace):
    """nvmath.bindings.cublasLt as far as cublaslt_scaled uses it, recording what it is told."""

    def __init__(self, returned=1, workspace=1 << 20):
        super().__init__(MatmulDescAttribute=enum.IntEnum("MatmulDescAttribute", DESC),
                         MatmulPreferenceAttribute=enum.IntEnum("MatmulPreferenceAttribute", PREF),
                         MatmulMatrixScale=enum.IntEnum("MatmulMatrixScale", SCALE),
                         ReductionScheme=enum.IntEnum("ReductionScheme", {"NONE": 0, "INPLACE": 1,
                                                                          "COMPUTE_TYPE": 2, "OUTPUT_TYPE": 4}),
                         matmul_heuristic_result_dtype=HEURISTIC_DTYPE)
        self.calls, self.desc_attrs, self.pref_attrs, self.live = [], {}, {}, set()
        self._next, self._returned, self._workspace = 100, returned, workspace

    def _new(self, kind):
        self._next += 1
        self.live.add(self._next)
        self.calls.append((kind, self._next))
        return self._next

    def _destroy(self, obj):
        self.live.remove(obj)

    @staticmethod
    def _read(buf, size, dtype):
        assert np.dtype(dtype).itemsize == size, "attribute buffer of the wrong size"
        return np.frombuffer(ctypes.string_at(buf, size), dtype=dtype)[0].item()

    # descriptors
    def matmul_desc_create(self, compute, scale_type):
        self.compute = (compute, scale_type)
        return self._new("desc")

    def get_matmul_desc_attribute_dtype(self, attr):
        return DESC_TYPES[int(attr)]

    def matmul_desc_set_attribute(self, desc, attr, buf, size):
        self.desc_attrs[int(attr)] = (self._read(buf, size, DESC_TYPES[int(attr)]), size)

    def matrix_layout_create(self, dtype, rows, cols, ld):
        obj = self._new("layout")
        self.calls[-1] = ("layout", obj, (dtype, rows, cols, ld))
        return obj

    def matmul_preference_create(self):
        return self._new("pref")

    def get_matmul_preference_attribute_dtype(self, attr):
        return PREF_TYPES[int(attr)]

    def matmul_preference_set_attribute(self, pref, attr, buf, size):
        self.pref_attrs[int(attr)] = self._read(buf, size, PREF_TYPES[int(attr)])

    matmul_desc_destroy = matrix_layout_destroy = matmul_preference_destroy = _destroy

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, pref, limit, results, count):
        self.heuristic = (handle, desc, a, b, c, d, pref, limit)
        out = np.frombuffer((ctypes.c_char * (limit * HEURISTIC_DTYPE.itemsize)).from_address(results),
                            dtype=HEURISTIC_DTYPE)
        out["workspace_size"][: self._returned] = self._workspace
        out["algo"]["data_"][: self._returned, 0] = 7777  # an algorithm's bytes, to find it again
        ctypes.c_int32.from_address(count).value = self._returned
        self.results_ptr = results

    def matmul(self, *args):
        (handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, ws, ws_size, stream) = args
        self.matmul_args = dict(handle=handle, desc=desc, a=a, adesc=adesc, b=b, bdesc=bdesc, c=c, cdesc=cdesc,
                                d=d, ddesc=ddesc, algo=algo, ws=ws, ws_size=ws_size, stream=stream,
                                alpha=ctypes.c_float.from_address(alpha).value,
                                beta=ctypes.c_float.from_address(beta).value,
                                algo_first_word=ctypes.c_uint64.from_address(algo).value)


def _point(m, n, k, layout="nt", mode="block"):
    cfg = compose_cfg(["variant=cublaslt", "precision=fp8", f"layouts=[{layout}]", f"sizes.shapes=[[{m},{n},{k}]]",
                       "sizes.square=[]", f"measure.fp8_scaling={mode}"])
    (p,) = expand(cfg)
    return p


def _scales(mode, m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32) * np.float32(100)
    b = rng.standard_normal((k, n), dtype=np.float32)
    b[:, : min(n, 128)] *= 1000  # scales that differ per block, so a misplaced one shows
    return fp8.scales_for(np, mode, a, b)


def _call(mode="block", m=64, n=2112, k=7168, lt=None):
    """DeepSeek-V3's attn_qkv_a at 64 tokens (n = 2112: a partial last n-block)."""
    lt = lt or FakeLt()
    p, sc = _point(m, n, k, mode=mode), _scales(mode, m, n, k)
    pl = scaled.plan(p, sc)
    allocs = []

    def alloc(nbytes):
        allocs.append(nbytes)
        return 0xABC000, object()

    mm = scaled.ScaledMatmul(lt, 42, pl, {"a": 0x1000, "b": 0x2000, "d": 0x3000}, {"a": 0x5000, "b": 0x6000}, alloc)
    return lt, pl, sc, mm, allocs


# -- the descriptor ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,mode_a,mode_b", [("block", 5, 4), ("rowcol", 3, 3)])
def test_the_descriptor_is_tn_with_the_scale_modes_and_pointers_of_the_right_operands(mode, mode_a, mode_b):
    lt, pl, sc, mm, _ = _call(mode)
    assert lt.compute == (68, 0)  # CUBLAS_COMPUTE_32F, CUDA_R_32F scale type
    got = lt.desc_attrs
    assert got[3] == (1, 4) and got[4] == (0, 4)  # TRANSA = CUBLAS_OP_T, TRANSB = CUBLAS_OP_N (int32)
    # cuBLAS's A is our B (weights: BLK128x128 in block mode), its B our A (VEC128)
    assert got[31] == (mode_a, 4) and got[32] == (mode_b, 4)
    assert got[17] == (0x5000, 8) and got[18] == (0x6000, 8)  # device pointers, int64
    # nothing else: C and D scale modes, epilogue, fast accumulation stay cuBLAS's defaults
    assert set(got) == {3, 4, 17, 18, 31, 32}


@pytest.mark.parametrize("mode", ["tensor", "none"])
def test_per_tensor_scales_leave_the_scale_modes_at_cublas_default_one_float_each(mode):
    # the path nvmath's Matmul leaves open: FP8 at an M that is no multiple of 16 (1 token)
    lt, pl, sc, mm, _ = _call(mode, m=1, n=6144, k=4096)
    got = lt.desc_attrs
    assert set(got) == {3, 4, 17, 18}  # no A / B_SCALE_MODE: SCALAR_32F, as nvmath and PyTorch leave it
    assert pl.scale_a.shape == (1,) and pl.scale_b.shape == (1,) and pl.scale_a.dtype == np.float32
    assert pl.scale_a[0] == np.float32(sc.b) and pl.scale_b[0] == np.float32(sc.a)  # cuBLAS's A is our B
    if mode == "tensor":
        assert sc.a != sc.b  # inputs drawn 100x apart: a swap would show
    rec = pl.record()
    assert rec["scale_mode_a"] == rec["scale_mode_b"] == "SCALAR_32F"
    assert [c[2] for c in lt.calls if c[0] == "layout"][1:] == [(28, 4096, 1, 4096), (14, 6144, 1, 6144)]


@pytest.mark.parametrize("m,n,k,takes", [(64, 6144, 4096, True), (1, 6144, 4096, False), (33, 4096, 2048, False),
                                         (1024, 1032, 1024, False)])
def test_nvmath_takes_fp8_only_at_m_n_k_multiples_of_16(m, n, k, takes):
    assert scaled.nvmath_takes(_point(m, n, k, mode="tensor")) is takes


def test_the_layouts_put_our_b_first_as_cublas_a_and_write_c_as_a_column_major_n_by_m():
    lt, pl, sc, mm, _ = _call("block", m=64, n=2112, k=7168)
    layouts = [c[2] for c in lt.calls if c[0] == "layout"]
    assert layouts == [(28, 7168, 2112, 7168),  # cuBLAS A: our B, e4m3, k x n column-major, ld k
                       (28, 7168, 64, 7168),  # cuBLAS B: our A, e4m3, k x m, ld k
                       (14, 2112, 64, 2112)]  # D (and C): bf16, n x m column-major = our m x n row-major


def test_the_preference_caps_the_workspace_and_allows_compute_type_reductions_only():
    lt, *_ = _call()
    assert lt.pref_attrs == {1: 32 << 20, 3: 2}


# -- the scale arrays ----------------------------------------------------------------------------------
def test_block_scale_arrays_have_cublaslts_shapes_and_memory_order():
    m, n, k = 64, 2112, 7168
    _, pl, sc, _, _ = _call("block", m, n, k)
    kb, nb = 56, 17  # ceil(7168 / 128), ceil(2112 / 128): the last n-block holds 64 columns
    assert sc.a.shape == (m, kb) and sc.b.shape == (kb, nb)
    # cuBLAS's A scale (our B, BLK128x128): K-major, columns of L4 = roundup(56, 4) = 56
    assert pl.scale_a.shape == (nb, 56) and pl.scale_a.strides == (56 * 4, 4)
    flat_a = pl.scale_a.reshape(-1)
    assert all(flat_a[j + q * 56] == sc.b[j, q] for j in range(kb) for q in range(nb))
    # cuBLAS's B scale (our A, VEC128): M-major, m per k-block
    assert pl.scale_b.shape == (kb, m) and pl.scale_b.strides == (m * 4, 4)
    flat_b = pl.scale_b.reshape(-1)
    assert all(flat_b[i + j * m] == sc.a[i, j] for i in range(m) for j in range(kb))
    assert pl.scale_a.dtype == np.float32 and pl.scale_b.dtype == np.float32


def test_block_scale_array_pads_a_k_block_count_that_is_not_a_multiple_of_4():
    _, pl, sc, _, _ = _call("block", m=64, n=256, k=1536 + 128 * 2)  # 14 k-blocks -> 16 per column
    assert sc.b.shape == (14, 2) and pl.scale_a.shape == (2, 16)
    assert np.array_equal(pl.scale_a[:, :14], sc.b.T) and (pl.scale_a[:, 14:] == 0).all()


def test_rowcol_vectors_are_b_per_column_for_cublas_a_and_a_per_row_for_cublas_b():
    _, pl, sc, _, _ = _call("rowcol", m=64, n=2112, k=512)
    assert pl.scale_a.shape == (2112,) and np.array_equal(pl.scale_a, sc.b.reshape(-1))
    assert pl.scale_b.shape == (64,) and np.array_equal(pl.scale_b, sc.a.reshape(-1))


def test_the_row_record_names_the_modes_and_shapes():
    _, pl, *_ = _call("block")
    rec = pl.record()
    assert rec["scale_mode_a"] == "BLK128x128_32F" and rec["scale_mode_b"] == "VEC128_32F"
    assert rec["scale_a_shape"] == [17, 56] and rec["scale_b_shape"] == [56, 64]


# -- the heuristic, the call, the clean-up ---------------------------------------------------------------
def test_the_call_hands_over_our_b_as_cublas_a_our_a_as_b_and_c_as_both_c_and_d():
    lt, pl, sc, mm, allocs = _call()
    assert lt.heuristic[0] == 42 and lt.heuristic[-1] == scaled.HEURISTIC_LIMIT
    assert allocs == [1 << 20] and mm.workspace_bytes == 1 << 20 and mm.returned == 1
    mm.run(0xBEEF)
    got = lt.matmul_args
    assert (got["a"], got["b"], got["c"], got["d"]) == (0x2000, 0x1000, 0x3000, 0x3000)
    layouts = [c[1] for c in lt.calls if c[0] == "layout"]
    assert (got["adesc"], got["bdesc"], got["cdesc"], got["ddesc"]) == (layouts[0], layouts[1], layouts[2],
                                                                        layouts[2])
    assert (got["alpha"], got["beta"]) == (1.0, 0.0)
    assert got["algo"] == lt.results_ptr and got["algo_first_word"] == 7777  # the heuristic's first algorithm
    assert (got["ws"], got["ws_size"], got["stream"]) == (0xABC000, 1 << 20, 0xBEEF)


def test_no_algorithm_is_an_error_naming_the_modes_and_leaves_nothing_behind():
    lt = FakeLt(returned=0)
    with pytest.raises(RuntimeError, match="no algorithm for fp8_scaling=block.*BLK128x128_32F x VEC128_32F"):
        _call(lt=lt)
    assert lt.live == set()


def test_free_destroys_every_descriptor():
    lt, pl, sc, mm, _ = _call()
    assert len(lt.live) == 5  # desc, three layouts, preference
    mm.free()
    assert lt.live == set()


# -- constraints and skips ---------------------------------------------------------------------------------
def test_constraints_name_what_excludes_a_point():
    assert scaled.constraints(_point(64, 2112, 7168), "block") is None
    assert "multiples of 4" in scaled.constraints(_point(66, 2112, 7168, mode="block"), "block")
    assert scaled.constraints(_point(66, 2112, 7168, mode="rowcol"), "rowcol") is None
    assert "layout tn" in scaled.constraints(_point(64, 2112, 7168, layout="tn"), "block")


@pytest.fixture
def hopper(monkeypatch):
    """A fake CuPy on an sm_90 device and a PyTorch to import: CublasLt.skip_reason's view."""
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(compute_capability="90"))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setattr(scaled, "lt_version", lambda: 130200)


def _skip(mode, variant="cublaslt", m=64, layout="nt"):
    from gemmlab.backends.cublaslt import CublasLt

    cfg = compose_cfg([f"variant={variant}", "precision=fp8", f"layouts=[{layout}]", f"sizes.shapes=[[{m},2112,7168]]",
                       "sizes.square=[]", f"measure.fp8_scaling={mode}"])
    (p,) = expand(cfg)
    return CublasLt(cfg).skip_reason(p)


def test_cublaslt_runs_every_scaling_on_hopper_with_cublaslt_13(hopper):
    for mode in fp8.MODES:
        assert _skip(mode) is None, mode


def test_cublaslt_skips_the_hopper_modes_with_an_old_cublaslt_a_bad_shape_or_in_the_search(hopper, monkeypatch):
    assert "not implemented by the cuBLASLt search" in _skip("block", "cublaslt_search")
    assert _skip("tensor", "cublaslt_search") is None
    assert "multiples of 4" in _skip("block", m=66) and _skip("rowcol", m=66) is None
    monkeypatch.setattr(scaled, "lt_version", lambda: 120800)
    assert "12.9" in _skip("rowcol") and _skip("tensor") is None


@pytest.fixture
def launch_route(monkeypatch):
    """CublasLt.make_launch up to its choice of path: fake CuPy / nvmath modules, both paths stubbed."""
    from gemmlab.backends.cublaslt import CublasLt

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=7))
    nvmath = types.ModuleType("nvmath")
    linalg, advanced = types.ModuleType("nvmath.linalg"), types.ModuleType("nvmath.linalg.advanced")
    advanced.Algorithm = advanced.MatmulPlanPreferences = object
    advanced.MatmulReductionScheme = types.SimpleNamespace(COMPUTE_TYPE=2)
    nvmath.linalg, linalg.advanced = linalg, advanced
    for name, mod in (("cupy", cupy), ("nvmath", nvmath), ("nvmath.linalg", linalg),
                      ("nvmath.linalg.advanced", advanced)):
        monkeypatch.setitem(sys.modules, name, mod)

    class Routed(Exception):
        pass

    def raw(self, *a, **k):
        raise Routed("raw")

    def matmul(self, *a, **k):
        raise Routed("nvmath")

    monkeypatch.setattr(CublasLt, "_raw_launch", raw)
    monkeypatch.setattr(CublasLt, "_matmul", matmul)

    def route(m, mode="tensor", variant="cublaslt"):
        cfg = compose_cfg([f"variant={variant}", "precision=fp8", "layouts=[nt]", f"sizes.shapes=[[{m},6144,4096]]",
                           "sizes.square=[]", f"measure.fp8_scaling={mode}"])
        (p,) = expand(cfg)
        with pytest.raises(Routed) as e:
            CublasLt(cfg).make_launch(p, None, None, None)
        return str(e.value)

    return route


@pytest.mark.parametrize("m,mode,path", [(1, "tensor", "raw"), (33, "none", "raw"), (64, "tensor", "nvmath"),
                                         (64, "none", "nvmath"), (64, "block", "raw"), (1, "rowcol", "raw")])
def test_fp8_takes_the_raw_bindings_where_nvmath_refuses_the_shape(launch_route, m, mode, path):
    assert launch_route(m, mode) == path


def test_the_search_never_takes_the_raw_path_for_per_tensor_scales(launch_route):
    # its rule skips such a point first (M % 16); were one to reach it, nvmath's own error is the row's reason
    assert launch_route(1, "tensor", "cublaslt_search") == "nvmath"
