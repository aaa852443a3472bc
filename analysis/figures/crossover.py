"""CPU against GPU: time of an N x N x N product against N for the CPU BLAS and for the GPU, with
and without host-device transfers of the operands (chapter 5.6-5.7, claims C12, C14d).

Curves (each where the data has it; every point is the best row at that N):
- CPU BLAS: the fastest CPU GEMM variant.
- GPU kernel (cuBLAS): the best standalone cuBLAS row (cublas or cublaslt) and nothing else; a
  precision without any cuBLAS row gets a separate, separately labelled curve of the fastest GPU
  variant instead.
- GPU + transfers: the kernel plus the ``transfer`` rows' time for the same point (H2D of A and
  B, D2H of C), one curve per kind of host memory (pageable, pinned).
- GPU end to end: the ``gemm_e2e`` probe, host arrays in and out, timed on the host clock.
The crossover is marked against the most complete GPU curve: end to end, else the fastest
kernel + transfers, else the kernel alone.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import data, style
from .throughput import plot_by_size, size_axis

PANEL_HEIGHT_IN = 1.5
CPU_COLOR = style.variant_color("cpu_blas")
GPU_COLOR = style.variant_color("cublas")
FASTEST_COLOR = "#555555"  # the fastest GPU variant, where a precision has no cuBLAS row
E2E_COLOR = style.variant_color("gemm_e2e_gpu")
TRANSFER_MARKERS = ("s", "^", "v", "D")
CROSSOVER_FLAT_LABELS = 11  # a full-column panel: labels stay flat up to this many
CUBLAS, FASTEST = "cuBLAS", "fastest GPU variant"


def cpu_times(ds: data.Dataset) -> pd.DataFrame:
    """Fastest CPU variant per (precision, n): its best row's median time, s."""
    rows = data.square(data.gemm(ds.cpu))
    return data.best_points(rows, ["precision", "n"])


def gpu_times(ds: data.Dataset) -> pd.DataFrame:
    """Per (precision, n): the kernel time, ``source`` says whose: cuBLAS (the best standalone
    cuBLAS row, :func:`analysis.data.cublas_standalone`) at every N of a precision with cuBLAS
    rows; the fastest GPU variant's best row for a precision without any."""
    rows = data.square(data.gemm(ds.gpu))
    lib = data.cublas_standalone(rows).rename(columns={"cublas_time_s": "time_s"})
    lib = lib[["precision", "n", "time_s"]].assign(source=CUBLAS)
    fastest = data.best_points(rows, ["precision", "n"])
    if not fastest.empty:
        fastest = fastest[~fastest["precision"].isin(set(lib["precision"]))]
        fastest = fastest[["precision", "n", "time_s"]].assign(source=FASTEST)
        lib = pd.concat([lib, fastest], ignore_index=True) if not lib.empty else fastest
    if lib.empty:
        return pd.DataFrame({"precision": pd.Series(dtype=object), "n": pd.Series(dtype="Int64"),
                             "time_s": pd.Series(dtype=float), "source": pd.Series(dtype=object)})
    lib["n"] = lib["n"].astype("Int64")
    lib["time_s"] = data.stable(lib["time_s"].astype(float))
    return lib.sort_values(["precision", "n"]).reset_index(drop=True)


def with_transfers(ds: data.Dataset, gpu: pd.DataFrame) -> pd.DataFrame:
    """Kernel + transfer time per (precision, n, memory), for square points with both."""
    t = data.transfer_times(ds.rows[ds.rows["device"] == (ds.gpu_ceilings.device or "")])
    t = data.square(t)
    if t.empty or gpu.empty:
        return pd.DataFrame({"precision": pd.Series(dtype=object), "n": pd.Series(dtype="Int64"),
                             "memory": pd.Series(dtype=object), "time_s": pd.Series(dtype=float)})
    out = gpu[["precision", "n", "time_s"]].merge(t[["precision", "n", "memory", "transfer_s"]],
                                                  on=["precision", "n"], how="inner")
    out["time_s"] = data.stable(out["time_s"] + out["transfer_s"])
    return out.sort_values(["precision", "memory", "n"]).reset_index(drop=True)


def end_to_end(ds: data.Dataset) -> pd.DataFrame:
    """The gemm_e2e probe per (precision, n): its best row's median time, s."""
    rows = data.square(ds.gpu[ds.gpu["op"] == data.GEMM_E2E])
    return data.best_points(rows, ["precision", "n"])


def crossover_n(cpu: pd.DataFrame, gpu: pd.Series) -> Tuple[Optional[int], bool]:
    """Smallest N measured on both from which the GPU time (a Series by n) stays below the
    CPU's, and whether the GPU was faster at every common N (the crossover lies below)."""
    common = sorted(set(cpu["n"]) & set(gpu.dropna().index))
    faster = [gpu[n] < float(cpu.loc[cpu["n"] == n, "time_s"].iloc[0]) for n in common]
    if not faster or not faster[-1]:
        return None, False
    i = len(faster)
    while i > 0 and faster[i - 1]:
        i -= 1
    return int(common[i]), i == 0


def build(ds: data.Dataset) -> Figure:
    with style.context():
        return _build(ds)


def _build(ds: data.Dataset) -> Figure:
    cpu, gpu = cpu_times(ds), gpu_times(ds)
    moved, e2e = with_transfers(ds, gpu), end_to_end(ds)
    memories = sorted(set(moved["memory"]))
    # the precisions the CPU ran, else those a CPU variant could run (what the GPU has of them)
    precisions = data.precision_order(cpu["precision"]) if not cpu.empty else []
    if not precisions:
        cpu_capable = data.configured_precisions("cpu")
        precisions = [p for p in data.precision_order(gpu["precision"]) if p in cpu_capable] or list(cpu_capable)
    fastest = bool((gpu.loc[gpu["precision"].isin(precisions), "source"] == FASTEST).any())
    handles = _handles(memories, not e2e.empty, fastest)
    fig = style.figure(0.45 + PANEL_HEIGHT_IN * max(len(precisions), 1)
                       + style.legend_height([h.get_label() for h in handles]))
    axes = fig.subplots(max(len(precisions), 1), 1, squeeze=False)[:, 0]
    for ax, p in zip(axes, precisions):
        _panel(ax, p, cpu[cpu["precision"] == p] if not cpu.empty else cpu, gpu[gpu["precision"] == p],
               moved[moved["precision"] == p], e2e[e2e["precision"] == p] if not e2e.empty else e2e, memories,
               lambda kind, prec, backends: ds.left_out(kind, data.GEMM, prec, backends))
    if not precisions:
        ax = axes[0]
        ax.set_yscale("log")
        ax.set_xscale("log", base=2)
        ax.set_ylabel("Time per product (s)")
        style.note(ax, ["no square GEMM rows of the CPU or the GPU in the data"], where="center")
    axes[-1].set_xlabel("N (m = n = k)")
    style.legend_below(fig, handles)
    return fig


def _handles(memories: List[str], e2e: bool, fastest: bool) -> List[Line2D]:
    handles = [Line2D([], [], marker="o", ms=2.5, color=CPU_COLOR, label="CPU BLAS"),
               Line2D([], [], marker="o", ms=2.5, color=GPU_COLOR, label="GPU kernel (cuBLAS)")]
    if fastest:
        handles.append(Line2D([], [], marker="o", ms=2.5, ls="-.", color=FASTEST_COLOR,
                              label="GPU kernel (fastest variant; no cuBLAS row)"))
    for i, m in enumerate(memories):
        handles.append(Line2D([], [], marker=TRANSFER_MARKERS[i % len(TRANSFER_MARKERS)], ms=2.5, ls="--",
                              color=GPU_COLOR, label=f"GPU kernel + transfers ({m})"))
    if e2e:
        handles.append(Line2D([], [], marker="D", ms=2.5, ls=":", color=E2E_COLOR, label="GPU end to end (host)"))
    return handles


def _panel(ax, p: str, c, g, moved, e2e, memories: List[str], left_out=lambda *a: "") -> None:
    notes: List[str] = []
    if not c.empty:
        plot_by_size(ax, c["n"], c["time_s"], style.gid("cpu", p), marker="o", ms=2.5, color=CPU_COLOR)
    else:
        notes.append(f"no CPU BLAS rows at {p}{left_out('cpu', p, ['cpu_blas'])}")
    lib, fast = g[g["source"] == CUBLAS], g[g["source"] == FASTEST]
    if not lib.empty:
        plot_by_size(ax, lib["n"], lib["time_s"], style.gid("gpu", p), marker="o", ms=2.5, color=GPU_COLOR)
    if not fast.empty:
        plot_by_size(ax, fast["n"], fast["time_s"], style.gid("gpu-fastest", p), marker="o", ms=2.5, ls="-.",
                     color=FASTEST_COLOR)
        notes.append(f"no cuBLAS row at {p}: the fastest GPU variant instead")
    if g.empty:
        notes.append(f"no GPU rows at {p}{left_out('gpu', p, None)}")
    for i, m in enumerate(memories):
        w = moved[moved["memory"] == m]
        if not w.empty:
            plot_by_size(ax, w["n"], w["time_s"], style.gid("gpu+transfers", p, m),
                         marker=TRANSFER_MARKERS[i % len(TRANSFER_MARKERS)], ms=2.5, ls="--", color=GPU_COLOR)
    if moved.empty and not g.empty:
        notes.append("no transfer rows: GPU with transfers not drawn")
    if not e2e.empty:
        plot_by_size(ax, e2e["n"], e2e["time_s"], style.gid("gpu-e2e", p), marker="D", ms=2.5, ls=":",
                     color=E2E_COLOR)
    # the crossover, against the most complete GPU curve there is
    if not e2e.empty:
        what, series = "GPU end to end", e2e.set_index("n")["time_s"]
    elif not moved.empty:
        what, series = "GPU + transfers", moved.groupby("n")["time_s"].min()
    else:
        what, series = "GPU kernel", g.set_index("n")["time_s"] if not g.empty else pd.Series(dtype=float)
    if not c.empty and not series.empty:
        n_x, below = crossover_n(c, series)
        if n_x is not None:
            text = f"{what} faster\nat every common N" if below else f"{what} faster\nfrom N = {n_x}"
            ax.axvline(n_x, color="#444444", lw=0.6, ls=":", gid=style.gid("crossover", p))
            # left of the line, where the curves run low (the larger sizes' markers stay clear),
            # unless the line is at the smallest size
            x, ha = (n_x * 1.08, "left") if below else (n_x / 1.08, "right")
            ax.text(x, 0.96, text, transform=ax.get_xaxis_transform(), fontsize=5.5, va="top", ha=ha,
                    gid=style.gid("crossover-label", p))
    style.log_axis(ax, "y", plain=False)
    sizes = list(c["n"] if not c.empty else []) + list(g["n"]) + list(e2e["n"] if not e2e.empty else [])
    size_axis(ax, sizes, max_flat=CROSSOVER_FLAT_LABELS)
    ax.set_title(p, loc="left")
    ax.set_ylabel("Time per product (s)")
    style.note(ax, notes, where="lower right")
