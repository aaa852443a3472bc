"""Worker isolation: a kernel that faults, hangs or dies stays inside its own point.

A CUDA error such as an illegal address is sticky: it poisons the process's CUDA context, and
every later call of that process fails with it. So the runner measures GPU points in a worker
process it owns (``pool.Worker``), one point at a time, and keeps no CUDA context itself. When a
point poisons the worker's context (``faults``), when the worker dies (a segfault, ``__trap``
in a host build, an abort), or when a point outlives its time limit (``limits``: the watchdog),
the point fails with that reason, naming its variant, and the runner starts a fresh worker for
the next point. Compiled kernels live in the on-disk cache, so a fresh worker loads them without
compiling again.

The room knows nothing of backends or rows: the parent names the code the child runs as a
``module:function`` target (gemmlab.measuring's worker target for runs; fakes in the tests), and
the child sends back whatever that code returns.
"""
from gemmlab.measure.worker.pool import Outcome, Worker, WorkerError  # noqa: F401
