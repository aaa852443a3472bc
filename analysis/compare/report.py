"""A comparison written out: compare.csv, compare.md, compare.png/.pdf and the terminal table."""
from __future__ import annotations

from pathlib import Path
from typing import List

import pandas as pd

from .. import style
from . import stats
from .core import (COMPARED, NO_BASELINE, NORMALIZED, NOT_EVIDENCE, ONLY_A, ONLY_B, PAIRED, SKIPPED, TWO_RUNS,
                   Comparison)

FILES = ("compare.csv", "compare.md", "compare.pdf", "compare.png")
DIRECTION = "time_ratio = median time B / median time A: below 1 B is faster, above 1 B is slower"
PAIRED_DIRECTION = ("paired (interleaved in one run): A = the baseline, B = the row's variant, timed batch by "
                    "batch by one timer; " + DIRECTION)
NORMALIZED_DIRECTION = ("normalized: time_ratio = (B's median time / its baseline's) / (A's / its baseline's), each "
                        "baseline timed interleaved with the point in its own run: below 1 B is faster")
VERDICT_COLORS = {stats.SAME: "#7f7f7f", stats.FASTER: "#2d9600", stats.SLOWER: "#b40000",
                  stats.UNSURE: "#f0b400"}
MEANING = {
    stats.SAME: "the interval lies inside ±threshold",
    stats.FASTER: "B faster: the whole interval lies below 1 - threshold",
    stats.SLOWER: "B slower: the whole interval lies above 1 + threshold (exit code 1)",
    stats.UNSURE: "the interval crosses a threshold, or a side's rows are not evidence",
}


def point_name(line: pd.Series) -> str:
    size = "x".join(str(line[c]) for c in ("m", "n", "k"))
    extra = "" if line["op"] == "gemm" else f" {line['op']}"
    against = f" vs {line['baseline']}" if line.get("baseline") else ""
    return f"{line['variant']}{against} {line['precision']}{extra} {size}" + (f" {line['cache']}" if line["cache"]
                                                                      not in ("flush", "warm", "") else "")


def _fmt(x, digits: int = 4) -> str:
    return style.format_sig(x, digits)


def _interval(line: pd.Series) -> str:
    return "" if pd.isna(line["ci_lo"]) else f"[{_fmt(line['ci_lo'])}, {_fmt(line['ci_hi'])}]"


def _threshold(line: pd.Series) -> str:
    return "" if pd.isna(line["threshold"]) else f"±{100 * line['threshold']:.1f}%"


def write_csv(comp: Comparison, path: Path) -> None:
    style.write_if_changed(path, comp.table.to_csv(index=False, lineterminator="\n").encode())


def direction(comp: Comparison) -> str:
    return {PAIRED: PAIRED_DIRECTION, NORMALIZED: NORMALIZED_DIRECTION}.get(comp.mode, DIRECTION)


def title(comp: Comparison) -> str:
    if comp.mode == PAIRED:
        return f"{comp.b.path}: each variant (B) against the baseline timed interleaved with it (A)"
    if comp.mode == NORMALIZED:
        return f"B = {comp.b.path} vs A = {comp.a.path}, each over the baseline timed in its run"
    return f"B = {comp.b.path} vs A = {comp.a.path}"


def summary(comp: Comparison) -> str:
    status, verdicts = comp.table["status"], comp.compared["verdict"]
    counts = ", ".join(f"{int((verdicts == v).sum())} {v}" for v in stats.VERDICTS)
    head = f"{len(verdicts)} points compared: {counts}; {int((status == NOT_EVIDENCE).sum())} UNSURE as "
    if comp.mode == PAIRED:
        return head + (f"the variant's rows are not evidence; {int((status == NO_BASELINE).sum())} with no "
                       f"baseline timed with them (listed, not compared)")
    tail = f"; {int((status == NO_BASELINE).sum())} with no baseline timed on both sides" \
        if comp.mode == NORMALIZED else ""
    return head + (f"a side's rows are not evidence; {int((status == ONLY_A).sum())} only in A, "
                   f"{int((status == ONLY_B).sum())} only in B, {int((status == SKIPPED).sum())} skipped on both"
                   + tail)


def render_markdown(comp: Comparison) -> str:
    t = comp.table
    sides = [f"- A: `{comp.a.path}` ({', '.join(comp.a.devices) or 'no device'})",
             f"- B: `{comp.b.path}` ({', '.join(comp.b.devices) or 'no device'})"]
    if comp.mode == PAIRED:
        sides = [f"- run: `{comp.b.path}` ({', '.join(comp.b.devices) or 'no device'})"]
    lines = [f"# {title(comp) if comp.mode != TWO_RUNS else f'{comp.b.path} against {comp.a.path}'}", "",
             *sides, f"- {direction(comp)}; the interval is 95%.",
             f"- key: {', '.join(comp.key)} (not run_id, point_key, timestamp, host or device)",
             *[f"- {n}" for n in comp.notes],
             f"- {summary(comp)}", "",
             "| verdict | meaning |", "|---|---|", *[f"| {v} | {m} |" for v, m in MEANING.items()], ""]
    shown = t[t["status"].isin([COMPARED, NOT_EVIDENCE])]
    if len(shown):
        lines += ["| point | verdict | time B/A | 95% interval | threshold | from | A s | B s | note |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for _, r in shown.iterrows():
            note = "; ".join(x for x in (r["why"], r["clock_note"] and
                                         f"{r['clock_note']}: at A's clock {_fmt(r['ratio_at_clock'])}") if x)
            lines.append(f"| {point_name(r)} | {r['verdict']} | {_fmt(r['time_ratio'])} | {_interval(r)} | "
                         f"{_threshold(r)} | {r['interval_from']} | {_fmt(r['time_a_s'])} | {_fmt(r['time_b_s'])} "
                         f"| {note} |")
        lines.append("")
    for status in (ONLY_A, ONLY_B, NO_BASELINE):
        one = t[t["status"] == status]
        if len(one):
            lines += [f"## {status.capitalize()} (not compared)", "",
                      *[f"- {point_name(r)}" for _, r in one.iterrows()], ""]
    return "\n".join(lines)


def print_table(comp: Comparison, console=None) -> None:
    """The compared points as a rich table on the terminal, then the summary, the points left
    uncompared by reason, and the notes."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, 150)  # a log or a pipe: do not fold every cell
    colors = {stats.SAME: "dim", stats.FASTER: "green", stats.SLOWER: "bold red", stats.UNSURE: "yellow"}
    table = Table(title=title(comp), caption=direction(comp))
    for col, just in (("point", "left"), ("verdict", "left"), ("B/A", "right"), ("95% interval", "right"),
                      ("threshold", "right"), ("from", "left"), ("at A's clock", "right"), ("why", "left")):
        table.add_column(col, justify=just, no_wrap=col != "why")
    for _, r in comp.compared.iterrows():
        v = r["verdict"]
        table.add_row(escape(point_name(r)), f"[{colors[v]}]{v}[/]", _fmt(r["time_ratio"]), _interval(r),
                      _threshold(r), r["interval_from"], _fmt(r["ratio_at_clock"]) if r["clock_note"] else "",
                      escape(r["why"]))
    console.print(table)
    console.print(summary(comp))
    left = comp.table[comp.table["status"] == NOT_EVIDENCE]
    for why, group in left.groupby("why", sort=True):
        console.print(f"  UNSURE, {len(group)} points: {escape(why)}")
    for n in comp.notes:
        console.print(f"  {escape(n)}")


def build_figure(comp: Comparison):
    """Time ratio B/A with its interval per compared point, coloured by verdict, each point's
    threshold band drawn behind it."""
    from matplotlib.lines import Line2D

    shown = comp.compared
    n = max(len(shown), 1)
    with style.context():
        fig = style.figure(3.2, max(style.COLUMN_WIDTH_IN, 0.6 + 0.11 * n))
        ax = fig.add_subplot(1, 1, 1)
        xs = list(range(len(shown)))
        for x, (_, r) in zip(xs, shown.iterrows()):
            t, c = r["threshold"], VERDICT_COLORS[r["verdict"]]
            ax.fill_between([x - 0.4, x + 0.4], 1 - t, 1 + t, color="#dddddd", lw=0, zorder=1)
            ax.plot([x, x], [r["ci_lo"], r["ci_hi"]], color=c, lw=1.2, zorder=3, gid=style.gid("ci", x))
            ax.plot([x], [r["time_ratio"]], marker="o", ms=3, color=c, zorder=4, gid=style.gid("ratio", x))
        ax.axhline(1.0, color="#444444", lw=0.6, zorder=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([point_name(r) for _, r in shown.iterrows()], rotation=90, fontsize=4.5)
        ax.set_xlim(-0.7, max(len(shown) - 0.3, 0.7))
        ax.set_ylabel("time B / A, each over its baseline\n(< 1: B faster)" if comp.mode == NORMALIZED
                      else "time B / A (< 1: B faster)")
        if shown.empty:
            style.note(ax, ["no point measured as evidence on both sides"], where="center")
        handles = [Line2D([], [], color=VERDICT_COLORS[v], marker="o", ms=3, lw=1.2, label=v)
                   for v in (stats.SAME, stats.FASTER, stats.SLOWER, stats.UNSURE)]
        handles.append(Line2D([], [], color="#dddddd", lw=5, label="threshold"))
        fig.legend(handles=handles, ncol=5, loc="outside upper center")
    return fig


def write(comp: Comparison, out: Path, figures: bool = True) -> List[Path]:
    """compare.csv and compare.md under ``out``, and with ``figures`` compare.pdf and compare.png."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(comp, out / "compare.csv")
    style.write_if_changed(out / "compare.md", render_markdown(comp).encode())
    if not figures:
        return [out / f for f in FILES if not f.endswith((".pdf", ".png"))]
    fig = build_figure(comp)
    style.save(fig, out, "compare")
    return [out / f for f in FILES]
