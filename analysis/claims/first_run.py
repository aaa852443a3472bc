"""The claim measured by ``experiments/claims_first_run.yaml`` (a call after the GPU idled): the
first run without warm-up is slower (C14e)."""
from __future__ import annotations

from typing import List

import pandas as pd

from .chapter import CLOCK_DROP_MIN, FIRST_RUN_MIN_RATIO
from .evidence import Evidence, as_text, extra, f, where
from .registry import claim
from .verdict import DOES_NOT_HOLD, HOLDS, Part, need_rows, not_measured


@claim("C14e", "5.7", "Without warm-up, the first run includes clock ramp-up and cold caches.",
       "probe rows (claims_first_run)")
def c14e(ev: Evidence) -> List[Part]:
    """The first call after the GPU idled (not the process's first call, which adds one-time
    start-up: module loading, context and handle creation). It includes a clock ramp only if the
    SM clock sat below the settled clock before it, and colder caches than the settled samples
    only if those ran on a warm L2 (``cache == warm``; the probe flushes the L2 before idling)."""
    what = "without warm-up the first run is slower (clock ramp-up, cold caches)"
    rows = ev.variant("first_run_gpu")
    row = ev.largest(rows)
    x = extra(row) if row is not None else {}
    if "after_idle_event_s" not in x:
        return [not_measured(what, need_rows("first_run_gpu", "claims_first_run"))]
    settled = float(row["time_median_s"])
    again = float(x["after_idle_event_s"])
    ratio = again / settled
    before = x.get("after_idle_sm_clock_before_mhz")
    settled_clock = row.get("sm_clock_min_mhz")
    ramp = before is not None and pd.notna(settled_clock) and float(before) < (1 - CLOCK_DROP_MIN) * float(settled_clock)
    cache = as_text(row.get("cache"))
    cold = cache == "warm"
    first = x.get("first_call_event_s")
    text = (f"{where(row)}: first call after {f(x.get('idle_s'))} s idle {f(again * 1e3)} ms = {f(ratio)}× the settled "
            f"median {f(settled * 1e3)} ms (p80 {f(row['time_p80_s'] * 1e3)} ms); SM clock before it {f(before)} MHz, "
            f"settled {f(row['sm_clock_min_mhz'])}–{f(row['sm_clock_max_mhz'])} MHz; settled samples on a "
            f"{cache or '?'} L2")
    if first is not None:
        text += (f"; the process's first call {f(float(first) * 1e3)} ms ({f(float(first) / settled)}×) adds one-time "
                 f"start-up (module loading, handles), not what the chapter names")
    numbers = {"after_idle_ratio": ratio}
    rule = (f"the first call after idle >= {FIRST_RUN_MIN_RATIO:g}× the settled median and above its p80: holds; "
            f"else does not hold; measured only where the clock sat > {CLOCK_DROP_MIN:.0%} below the settled clock "
            f"before it (ramp) or the settled samples ran on a warm L2 (cold caches)")
    if not (ramp or cold):
        p = not_measured(what, need_rows("first_run_gpu after an idle long enough for the SM clock to drop (params.idle_s),"
                                     " and the settled median on a warm L2 (measure.cache=warm)", "claims_first_run")
                         + f". Measured here: {text}; neither a clock ramp nor colder caches than the settled "
                           f"samples was in the call", rule)
        p.numbers = numbers
        return [p]
    slower = ratio >= FIRST_RUN_MIN_RATIO and again > float(row["time_p80_s"])
    causes = " and ".join(c for c, on in (("a clock ramp", ramp), ("cold caches", cold)) if on)
    return [Part(what, HOLDS if slower else DOES_NOT_HOLD, f"{text} (the call had {causes})", rule, numbers)]
