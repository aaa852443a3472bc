"""Probes: measurements that are not C = A @ B, for the chapter's claims (backends ``gpu_probe``
and ``cpu_probe``).

A variant with ``backend: gpu_probe`` or ``backend: cpu_probe`` names a ``probe.kind`` and its
``probe.params``; a GPU probe that compiles a kernel also names its ``probe.source`` (a ``.cu``
file relative to the project root, as ``cuda.source`` is). The probe owns the inputs, the check
and the timing of its point: timing goes through the executor's timer (on the GPU: cold L2, a
busy GPU before each start event, interleaving) exactly as for a GEMM, and the dict it returns
overrides the row's GEMM defaults (``op``, ``flops``, ``bytes_min``, ``intensity``, ...).

GPU probes (``backend: gpu_probe``; the kinds are :data:`gpu.PROBES`):

=================  ==============  ======================================================  =======  ========
kind               op              what                                                    claim    module
=================  ==============  ======================================================  =======  ========
copy               copy            device-to-device cudaMemcpy of m elements: the memory   C1       memory
                                   roof (bytes read + written / time)
vecadd             vecadd          hand-written c = a + b over m elements                  C2       memory
gemv               gemv            cuBLAS ?gemv, y = A x with A m x k (shape [m, 1, k])    C2, C13  memory
transfer           transfer        H2D of A and B, D2H of C for a GEMM point; pageable or  C14d     transfer
                                   pinned host memory (``params.memory``)
gemm_e2e           gemm_e2e        host arrays in, host array out: H2D, cuBLAS, D2H and    C12      transfer
                                   the synchronisation, timed on the host clock
first_run          first_run       the first cuBLAS call of the process, the first after   C14e     transfer
                                   the GPU idled, and the settled median
smem_bandwidth     smem_bandwidth  conflict-free 16-byte shared-memory loads               C5       smem
smem_bank          smem_bank       4-byte loads at lane stride ``params.stride``           C14b     smem
smem_latency       smem_latency    a pointer chase through shared memory, SM cycles/load   C5       smem
wmma_layout        wmma_layout     the chapter's wmma_gemm; B's layout declared wrong      C9       wmma
wmma_alignment     wmma_alignment  wmma_gemm on pointers shifted by a few bytes (child     C9       wmma
                                   processes: a misaligned access kills the CUDA context)
sgemm32_unguarded  boundary        the chapter's sgemm32 at any size, inside padded        C14a     boundary
                                   buffers whose padding is checked afterwards
l2_bandwidth       l2_bandwidth    ld.global.cg over a working set resident in L2 (warm)   roofs    cache
l1_bandwidth       l1_bandwidth    ld.global.ca over a slice per block resident in L1      roofs    cache
mma_sync_peak      mma_sync_peak   independent mma.sync m16n8k16 bf16 from registers: the  #20      mma
                                   legacy tensor-core path's rate (stage 10's ceiling)
wgmma_peak         wgmma_peak      wgmma m64nNk32 e4m3 from shared memory, a k-block of    #30      mma
                                   four then a wait, per N (``params.n``; sm_90a: probe.arch)
=================  ==============  ======================================================  =======  ========

Host probes (``backend: cpu_probe``; the kinds are ``cpu.CpuProbe.KINDS``), all in :mod:`.cpu`:

=======  =======  ==========================================================================
kind     op       what
=======  =======  ==========================================================================
copy     copy     np.copyto of m elements split over the threads: the host memory roof
                  (bytes read + written / time, as the GPU's copy probe counts them)
vecadd   vecadd   np.add(a, b, out=c) over m elements split over the threads
gemv     gemv     y = A x through NumPy's BLAS (?gemv), A m x k (shape [m, 1, k])
=======  =======  ==========================================================================

Modules:

- :mod:`.gpu`: the ``gpu_probe`` backend (:class:`~.gpu.GpuProbe`), the registry of probe kinds,
  and the compiling and loading of the probes' kernels.
- :mod:`.common`: what every GPU probe shares (the ``Probe`` interface, ``ProbeSkip``, inputs,
  memory check, row fields).
- :mod:`.memory`, :mod:`.transfer`, :mod:`.smem`, :mod:`.wmma`, :mod:`.boundary`: the GPU probe
  families of the table above.
- :mod:`.child`: the child processes (``python -m gemmlab.backends.probes.child wmma-alignment
  '<json>'``).
- :mod:`.cpu`: the ``cpu_probe`` backend, the host's probes.

Kernels are compiled with nvcc (:mod:`gemmlab.backends.nvcc`) into cubins cached under
``paths.cache``/probes and loaded with ``cupy.RawModule(path=...)``. CuPy and CUDA libraries are
imported inside functions, so every module here imports on machines without a GPU.
"""


def probe_of(point, backend: str):
    """(probe.kind, probe.params) of a probe variant's point: one reader for both probe backends."""
    probe = point.variant_cfg.get("probe")
    if probe is None:
        raise ValueError(f"variant {point.variant} (backend {backend}) has no `probe:` section")
    return str(probe.kind), dict(probe.params or {})
