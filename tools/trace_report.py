#!/usr/bin/env python3
"""trace_report.py - what a TIDE_TRACE file says, in numbers.

For each rank and each kind of operation: how many ran, how long they
were in flight (the union of their spans), and how much of that time the
rank's threads spent inside their own tide_trace_begin/end regions
(compute, in the training demo) or blocked in tide_wait.  "under
compute" is the share of communication that ran while the caller
computed: what prefetching is for.

    tools/trace_report.py build/demo-trace.json
"""
import json
import sys
from collections import defaultdict


def union(spans):
    """Sorted, merged [start, end) intervals."""
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(iv):
    return sum(e - s for s, e in iv)


def overlap(a, b):
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s < e:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def regions(events):
    """Outermost user regions per rank, from B/E pairs per thread."""
    out = defaultdict(list)
    open_at = defaultdict(list)
    for ev in sorted(events, key=lambda x: x.get("ts", 0)):
        key = (ev["pid"], ev["tid"])
        if ev["ph"] == "B":
            open_at[key].append(ev["ts"])
        elif ev["ph"] == "E" and open_at[key]:
            start = open_at[key].pop()
            if not open_at[key]:
                out[ev["pid"]].append((start, ev["ts"]))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        events = json.load(f)["traceEvents"]
    ops = defaultdict(list)
    waits = defaultdict(list)
    for ev in events:
        if ev.get("ph") != "X":
            continue
        span = (ev["ts"], ev["ts"] + ev["dur"])
        if ev.get("cat") == "op":
            ops[(ev["pid"], ev["name"])].append(span)
        elif ev.get("cat") == "wait":
            waits[ev["pid"]].append(span)
    compute = {pid: union(iv) for pid, iv in regions(events).items()}
    waited = {pid: union(iv) for pid, iv in waits.items()}
    print(f"{'rank':>4}  {'operation':<16} {'count':>6} {'in flight ms':>13} "
          f"{'under compute':>14} {'waited on':>10}")
    for (pid, name), spans in sorted(ops.items()):
        busy = union(spans)
        t = length(busy)
        under = overlap(busy, compute.get(pid, [])) / t * 100 if t else 0
        blocked = overlap(busy, waited.get(pid, [])) / t * 100 if t else 0
        print(f"{pid:>4}  {name:<16} {len(spans):>6} {t / 1000:>13.2f} "
              f"{under:>13.1f}% {blocked:>9.1f}%")


if __name__ == "__main__":
    main()
