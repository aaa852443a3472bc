"""Structured-config schemas for every config group, registered in Hydra's ConfigStore.

The YAML files under ``conf/`` are merged into these dataclasses at compose time, so a misspelt
key or a wrong type fails with "Key 'x' not in 'VariantConf'" before any work starts.

Groups that select several configs at once (``variant``, ``precision``) use the package header
``# @package variant.<name>``; the resulting node is a ``Dict[str, VariantConf]``. Two computed
entries of the ``variant`` group, ``default`` (every variant with ``in_default_sweep: true``) and
``all``, are built here by scanning ``conf/variant/``: adding a variant is one YAML (plus its
kernel source) and nothing else to edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from gemmlab import variants
from gemmlab.paths import CONF_DIR, ROOT  # noqa: F401  (ROOT: the checkout, for code that names paths)


class Backend(str, Enum):
    cpu_blas = "cpu_blas"  # NumPy's BLAS (OpenBLAS, MKL, ...)
    cublas = "cublas"  # cuBLAS through CuPy
    cublaslt = "cublaslt"  # cuBLASLt through nvmath-python
    cutlass = "cutlass"  # CUTLASS kernels emitted by cutlass_cppgen
    cuda = "cuda"  # the hand-written kernels under kernels/cuda
    gpu_probe = "gpu_probe"  # measurements other than GEMM on the GPU (copy, vector add, transfers)
    cpu_probe = "cpu_probe"  # the same on the host


class CachePolicy(str, Enum):
    flush = "flush"  # write a buffer of at least the L2 size before every sample
    rotate = "rotate"  # cycle through input sets that together exceed the L2
    warm = "warm"  # nothing: the same inputs stay in L2 (back-to-back timing)


class SpinPolicy(str, Enum):
    always = "always"  # a spin of at least busy_us before every start event
    as_needed = "as_needed"  # spin only for what the queued flush does not already cover


class TimerSource(str, Enum):
    events = "events"  # each sample is its CUDA event pair's elapsed time
    cupti = "cupti"  # each sample spans the call's kernels in CUPTI's records (needs cupti-python)


class Distribution(str, Enum):
    normal = "normal"  # standard normal
    uniform = "uniform"  # on [-1, 1]
    # small integers in [-4, 4]: every product and partial sum is exact in the accumulate type,
    # so the check demands C == round_out(A @ B) element by element (gemmlab/measure/check.py)
    exact = "exact"
    # SPARSE_ZERO_FRACTION of the elements zero, the rest standard normal: fewer bits toggle, less
    # power (issue 21's input experiment); an element of C whose every product is zero must be 0
    sparse = "sparse"


class Counters(str, Enum):
    none = "none"
    ncu = "ncu"


@dataclass
class RequireConf:
    """A constraint on the point, as an expression over m, n, k and the kernel's defines."""

    expr: str = MISSING
    reason: str = MISSING


@dataclass
class TensorMapConf:
    """A TMA tensor map the launcher builds on the host and passes after K (Hopper kernels)."""

    operand: str = MISSING  # A | B | C
    box: List[Any] = field(default_factory=list)  # box extent [rows, cols], expressions
    swizzle: int = 128  # 0 | 32 | 64 | 128 bytes


@dataclass
class CudaKernelConf:
    """A hand-written kernel under ``kernels/cuda``: how to build it and how to launch it.

    ``block``, ``grid`` and ``smem_bytes`` are integers or expressions over m, n, k, the
    ``defines`` and ``cdiv``/``min``/``max`` (see :mod:`gemmlab.expr`).
    """

    source: str = MISSING  # path relative to the project root
    entry: str = MISSING  # extern "C" kernel name
    defines: Dict[str, Any] = field(default_factory=dict)  # passed as -DNAME=value
    # defines computed per point: NAME: an expression over the point's names (m, n, k, elem_bytes,
    # out_bytes, fp8_scaling, layout, sm_count: device.sm_count) and the defines, passed as -D flags
    # beside them (a bool as 0/1) and seen by every other rule; each distinct value is a build of its
    # own (stage 12's B_KMAJOR: how B is stored follows the point's layout). A rule named after a
    # define refines it only if it reads it (stage 15's BN: "BN if BN > 0 else ...": the YAML's 0
    # means chosen per point, an override's 64 or 128 is kept); its value replaces the define's in
    # the flags, the kernel name and the row. Any other name a define or a point field already has
    # is an error.
    point_defines: Dict[str, Any] = field(default_factory=dict)
    # for analysis: what rows measured before a define existed ran with (a row that lacks the
    # define is read as this value, not as the YAML's current one); never passed to nvcc
    defines_before: Dict[str, Any] = field(default_factory=dict)
    block: List[Any] = field(default_factory=lambda: [256, 1, 1])
    grid: List[Any] = field(default_factory=lambda: ["cdiv(n, 128)", "cdiv(m, 128)", 1])
    smem_bytes: Any = 0  # dynamic shared memory per block
    arch: str = "sm_90"  # sm_90 or sm_90a (wgmma, setmaxnreg)
    extra_flags: List[str] = field(default_factory=list)
    no_spill: bool = False  # CI fails if ptxas reports spill stores/loads
    padding: Optional[str] = None  # set when the kernel pads operands; stated in the row
    tensor_maps: List[TensorMapConf] = field(default_factory=list)  # see gemmlab/gpu/tma.py
    # named expressions over m, n, k, the defines and sm_count, evaluated in order before block, grid,
    # smem_bytes and workspace_bytes (which may use them, as may later ones); the row records their
    # values (extra.let): one place for a launch decision several rules need (stage 14's split S)
    let: Dict[str, Any] = field(default_factory=dict)
    # device scratch the kernel takes as its last argument (after the tensor maps and fp8 scales):
    # this many bytes (an expression), allocated and zeroed once per launch object, not per call;
    # the kernel must leave it as its next call needs it (stage 14's counters back at zero).
    # None: no such argument
    workspace_bytes: Any = None


@dataclass
class CutlassConf:
    """A CUTLASS kernel emitted through ``cutlass_cppgen``; ``auto`` keeps CUTLASS's choice."""

    layout_a: str = "row"
    layout_b: str = "row"
    layout_c: str = "row"
    opclass: str = "auto"  # auto | tensorop | simt
    # the CUTLASS generation of the kernels: null = as the target's (SM90: CUTLASS 3 wgmma kernels
    # for tensorop, SM80 2.x kernels for simt); 80 = CUTLASS 2.x SM80 kernels (mma.sync, cp.async)
    kernel_cc: Optional[int] = None
    tile: List[int] = field(default_factory=list)  # threadblock tile [m, n, k]; empty = auto
    cluster: List[int] = field(default_factory=list)  # cluster shape [m, n, k]; empty = auto
    stages: Optional[int] = None
    kernel_schedule: str = "auto"  # auto | tma_warp_specialized | pingpong | cooperative
    epilogue_schedule: str = "auto"
    tile_scheduler: str = "auto"  # auto | persistent | stream_k
    # runtime arguments of the persistent CUTLASS 3 tile schedulers (no recompile): CTA swizzle
    # 1 | 2 | 4 | 8 and raster order heuristic | along_m | along_n
    swizzle: int = 1
    raster_order: str = "heuristic"
    search: bool = False  # profile tile descriptions and keep the best
    search_limit: int = 0  # 0 = all tile descriptions
    # listed: CUTLASS's order (largest tiles first, every schedule of one tile before the next);
    # diverse: round-robin over (CTA tile, cluster) groups, preferred schedules first
    search_order: str = "listed"
    search_groups: int = 0  # diverse: the first N (tile, cluster) groups; 0 = all
    # the best N kernels are timed again with every swizzle x raster order below; 0 = off
    search_scheduler_top: int = 3
    search_swizzles: List[int] = field(default_factory=lambda: [1, 2, 4, 8])
    search_raster_orders: List[str] = field(default_factory=lambda: ["heuristic", "along_m", "along_n"])
    compile_jobs: int = 0  # 0 = one per CPU core


@dataclass
class CublasLtConf:
    autotune: bool = False
    autotune_iterations: int = 10
    # search: the heuristic's top search_limit algorithms (Matmul.plan's limit), each checked and
    # timed interleaved; the fastest correct one is measured (gemmlab/backends/cublaslt_search.py)
    search: bool = False
    search_limit: int = 16


@dataclass
class ProbeConf:
    """A measurement that is not C = A @ B (see gemmlab/backends/probes/): which one, and its
    parameters. The point's m, n, k keep their meaning where they have one (vector length = m)."""

    kind: str = MISSING
    params: Dict[str, Any] = field(default_factory=dict)
    # the kernel a GPU probe compiles, a path relative to the project root (as cuda.source);
    # None for probes that compile none (copy, gemv, transfers, the host's probes)
    source: Optional[str] = None
    # the target it compiles for where its instructions need an architecture-specific one (sm_90a: wgmma);
    # None: the device's own (sm_90 on an H200)
    arch: Optional[str] = None


@dataclass
class VariantConf:
    backend: Backend = MISSING
    description: str = ""
    precisions: List[str] = field(default_factory=list)
    in_default_sweep: bool = True  # pitfall variants say false
    stage: Optional[int] = None  # position on the chapter's ladder, for figures
    # a probe variant that measures the issue rate of the instruction this stage computes with
    # (mma_sync_peak for mma.sync): the ladder scales its TFLOP/s per MHz to the rung's own clock,
    # the most the stage could reach there; for analysis only (not in the point key)
    ceiling: Optional[str] = None
    # what the variant is, for selecting it (variant=tag_<tag>, experiments, claims): e.g. ladder,
    # simt, tensor_core, hopper, library, cutlass, probe, pitfall, negative_control
    tags: List[str] = field(default_factory=list)
    intensity_model: Optional[str] = None  # modeled DRAM FLOP/byte, an expression
    requires: List[RequireConf] = field(default_factory=list)
    out_dtype: Optional[str] = None  # overrides the precision's output type (wmma writes float)
    cuda: Optional[CudaKernelConf] = None
    cutlass: Optional[CutlassConf] = None
    cublaslt: Optional[CublasLtConf] = None
    probe: Optional[ProbeConf] = None
    threads: Optional[int] = None  # CPU BLAS threads; None = all
    # operand layouts the variant runs (gemmlab/operands.py); null = its backend's own: the
    # libraries and the CPU baseline all four, the hand-written stages nn only
    layouts: Optional[List[str]] = None


@dataclass
class PrecisionConf:
    in_dtype: str = MISSING  # numpy / ml_dtypes name of A and B storage
    out_dtype: str = MISSING  # storage of C
    compute: str = MISSING  # fp64 | fp32 | tf32 | fp16 | bf16 | fp8: the math the units do
    accumulate: str = "float32"
    tolerance: float = MISSING  # max relative Frobenius error against FP64
    description: str = ""


@dataclass
class LlmModelConf:
    """A model's dimensions, as its published config names them (gemmlab/llm_shapes.py expands
    them into named GEMM shapes); fields a family does not use stay 0."""

    family: str = MISSING  # llama | deepseek_v3
    source: str = ""  # the config's URL
    hidden_size: int = MISSING
    intermediate_size: int = 0
    num_attention_heads: int = 0
    num_key_value_heads: int = 0
    head_dim: int = 0  # 0: hidden_size / num_attention_heads
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    moe_intermediate_size: int = 0
    n_routed_experts: int = 0
    num_experts_per_tok: int = 0
    n_shared_experts: int = 0


@dataclass
class SizesConf:
    description: str = ""
    square: List[int] = field(default_factory=list)  # N -> (N, N, N)
    shapes: List[List[int]] = field(default_factory=list)  # explicit [m, n, k]
    max_dim: int = 65536  # larger dimensions are rejected as absurd
    # named LLM shapes (gemmlab/llm_shapes.py): each model's projections at each token count
    models: Dict[str, LlmModelConf] = field(default_factory=dict)
    tokens: List[int] = field(default_factory=list)
    model_names: List[str] = field(default_factory=list)  # the models to expand; empty = all of them


class Fp8Scaling(str, Enum):
    """How fp8 operands are scaled into FP8's range (gemmlab/fp8.py); other precisions ignore it."""
    none = "none"  # cast as drawn, scales 1: inputs beyond FP8's range overflow
    tensor = "tensor"  # one FP32 scale per operand, amax / FP8_MAX
    rowcol = "rowcol"  # one scale per row of A and column of B (cuBLASLt OUTER_VEC_32F, Hopper)
    block = "block"  # DeepSeek-V3: A per 1 x 128, B per 128 x 128 block (cuBLASLt VEC128 / BLK128x128, Hopper)


class Sanitize(str, Enum):
    """compute-sanitizer tools a point's checked call can run under (gemmlab/sanitize.py)."""
    none = "none"
    memcheck = "memcheck"  # out-of-bounds and misaligned accesses, leaks
    racecheck = "racecheck"  # shared-memory hazards
    synccheck = "synccheck"  # barriers used wrongly
    initcheck = "initcheck"  # reads of uninitialised global memory


class Isolate(str, Enum):
    """Which points run in a worker process the runner owns (gemmlab/measure/worker)."""
    gpu = "gpu"  # GPU points (a fault poisons only the worker's CUDA context)
    all = "all"  # every point, host ones too (a host build that crashes or hangs)
    none = "none"  # everything in the runner's process, as before isolation existed


@dataclass
class MeasureConf:
    warmup_s: float = 0.5  # warm-up by time, so the SM clock settles before timing
    warmup_min_iters: int = 2
    min_samples: int = 10
    max_samples: int = 200
    min_time_s: float = 0.2
    max_time_s: float = 5.0
    max_noise: float = 0.02  # (p80 - p20) / median that the stopping rule waits for
    # A spread that does not fall to max_noise by max_samples (a 7-30 us GPU call: the CUDA events'
    # own start-up jitter) does not shrink with more samples, but the median's 95% interval does
    # (gemmlab/measure/stats.py): such a row takes more of the same samples, up to max_samples_ci
    # (<= max_samples: never) and within max_time_s, until that interval's relative half-width is
    # at most max_median_ci; it is then reliable (gemmlab/measure/validity.py) if its noise is at
    # most max_noise_hard, past which it stays unreliable whatever the count.
    max_samples_ci: int = 4000
    max_median_ci: float = 0.005
    max_noise_hard: float = 0.10
    batch: int = 10  # samples enqueued between host synchronisations
    cache: CachePolicy = CachePolicy.flush
    busy_us: float = 20.0  # spin queued before each start event so launch latency stays outside
    flush_bytes: int = 0  # cache=flush writes this many bytes; 0 = twice the device's L2
    spin: SpinPolicy = SpinPolicy.always  # whether a flush already counts as the busy work
    flush_discard: bool = True  # after the flush, discard its lines from the L2 (no dirty lines left)
    timer: TimerSource = TimerSource.events
    cuda_graph: bool = False  # launch the timed call as a CUDA graph
    seed: int = 0
    distribution: Distribution = Distribution.normal
    input_scale: float = 1.0  # inputs are drawn from `distribution`, then multiplied by this
    fp8_scaling: Fp8Scaling = Fp8Scaling.none  # fp8 points: none | tensor | rowcol | block
    check: bool = True
    check_repeats: int = 1  # run the checked call this often on the same inputs (races move the error)
    throttle_fraction: float = 0.9  # min SM clock below this fraction of max marks the row
    clock_stable_fraction: float = 0.02
    # variants timed interleaved with each GPU point of a non-library variant (pct_of_baseline); any
    # variant may be one: variant=B measure.baseline=[A] is the paired A/B mode (compare --paired)
    baseline: List[str] = field(default_factory=lambda: ["cublas", "cublaslt"])
    counters: Counters = Counters.none
    # energy per call: the call back to back for energy_s after the samples, NVML's energy counter
    # read around it (gemmlab/measure/energy.py); GPU GEMM points only
    energy: bool = False
    energy_s: float = 1.0
    threads: Optional[int] = None  # CPU BLAS threads; None = library default
    # guard zones (gemmlab/measure/guards.py): C, A and B sit between this many random bytes on
    # each side, compared after the checked call and after the timed calls; 0 = off
    guard_bytes: int = 262144
    # the watchdog (gemmlab/measure/worker/limits.py): 0 = a limit per phase derived from the
    # point's FLOPs and the device's peak, at least point_timeout_floor_s; > 0 = this many seconds
    # for the whole point
    point_timeout_s: float = 0.0
    point_timeout_floor_s: float = 10.0
    # run each GPU point's checked call under compute-sanitizer first (gemmlab/sanitize.py); the
    # point's timings are then not evidence
    sanitize: Sanitize = Sanitize.none


@dataclass
class DeviceConf:
    name: str = MISSING
    kind: str = "gpu"  # gpu | cpu
    memory_bandwidth_gbs: float = MISSING
    peak_tflops: Dict[str, float] = field(default_factory=dict)
    source: str = ""
    # Dense FLOP per clock per SM of the fastest unit for each precision's compute type (tensor
    # cores, or FFMA/DFMA where those are faster): the peak at the clock a point ran at is this x
    # SM count x the in-band SM clock. A point faster than that is impossible and fails. Applies
    # only to a GPU whose compute capability is ``compute_capability``.
    compute_capability: Optional[str] = None
    sm_flops_per_clock: Dict[str, float] = field(default_factory=dict)
    # The device's SM count (its datasheet's): what a cuda variant's point_defines read as sm_count
    # when they choose a build by it (stage 15's tile width by waves), in every process of a run
    # alike -- the runner, its worker, a CPU machine compiling ahead -- so a build, its cubin and
    # its row agree; read before any GPU is claimed, so no CUDA starts early. None: read from the
    # GPU when such a rule is first evaluated. A launch on a GPU with another count says so in the
    # log and the row (extra.rules_sm_count); the persistent grids always size by the GPU's own.
    sm_count: Optional[int] = None


@dataclass
class PathsConf:
    root: str = MISSING
    outputs: str = MISSING
    cache: str = MISSING
    reference: str = MISSING


@dataclass
class RunConf:
    name: str = "gemm"
    fail_on_error: bool = True  # non-zero exit code when a point failed
    progress: bool = True
    resume: bool = True  # skip points already ok in this run's results file
    gpu_wait_s: float = 1800.0  # how long to wait for another gemmlab run to release the GPU
    isolate: Isolate = Isolate.gpu  # which points run in a worker process (gemmlab/measure/worker)
    # a worker of this run's own, ended with it, instead of one shared by the runs of the process: a
    # sweep's job then measures as in a fresh process (in a shared worker, a run of another kernel
    # slowed the next run's cuBLAS by 2-4%; with its own, in line: README, isolation). About 1.5 s
    # a job; false shares the worker
    fresh_worker: bool = True
    report: bool = True  # write report.html (analysis.report) when the run or the sweep ends


@dataclass
class GemmlabConf:
    variant: Dict[str, VariantConf] = field(default_factory=dict)
    precision: Dict[str, PrecisionConf] = field(default_factory=dict)
    sizes: SizesConf = MISSING
    measure: MeasureConf = field(default_factory=MeasureConf)
    device: DeviceConf = MISSING
    paths: PathsConf = field(default_factory=PathsConf)
    run: RunConf = field(default_factory=RunConf)
    experiment: Dict[str, Any] = field(default_factory=dict)  # claim id, notes
    # The workload axes beside sizes (gemmlab/operands.py): how A and B are stored (nn nt tn tt:
    # A and/or B transposed) and how many GEMMs of each shape one strided batched call computes.
    layouts: List[str] = field(default_factory=lambda: ["nn"])
    batch: List[int] = field(default_factory=lambda: [1])


def load_variant(name: str):
    """A variant's config by name, validated against the schema, whether or not the run selected
    it (the runner times the cuBLAS baselines next to every point)."""
    return OmegaConf.merge(OmegaConf.structured(VariantConf), OmegaConf.load(variants.info(name).path))


_registered_sets = None  # the variant sets stored last: storing the schema again costs 30 ms a compose


def register_configs() -> None:
    """The schema, and the variant group's computed options (gemmlab/variants.py: default, all,
    tag_<tag>); once, and again when the variant folder's sets change."""
    global _registered_sets
    sets = variants.sets()
    if sets == _registered_sets:
        return
    cs = ConfigStore.instance()
    cs.store(name="gemmlab_schema", node=GemmlabConf)
    for set_name, names in sets.items():
        cs.store(group="variant", name=set_name, node=OmegaConf.create({"defaults": names}))
    _registered_sets = sets


def compose(overrides=(), outputs: Optional[str] = None):
    """The run config for ``overrides`` as `python run.py <overrides>` would compose it, for code
    that runs outside a Hydra app (tests, benchmarks). ``${hydra:...}`` values are resolved here."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import open_dict

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.paths.root = str(ROOT)
        if outputs is not None:
            cfg.paths.outputs = str(outputs)
        cfg.pop("hydra")
    return cfg
