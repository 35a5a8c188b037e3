#!/usr/bin/python3
"""compare_report.py - merge the JSON records of one tools/compare.sh run,
print the side-by-side tables and draw the plot.

    compare_report.py OUT_DIR

Reads OUT_DIR/raw/*.json (arrays of records written by tide-perf,
tide-overlap, mpi-coll-bench, gloo_bench.py (Gloo, and tide's torch
backend as "torch-tide"), ddp_demo.py and loopback-limits, plus
compare.sh's run.json) and writes:
    OUT_DIR/compare.json   every record, the run's facts and the table rows
    OUT_DIR/table-full.md  the tables as printed, in Markdown
    OUT_DIR/table.md       the README's cut: the anchors, sizes 16x apart,
                           and the largest
    OUT_DIR/compare.png    busbw against size, one line per system, one
                           subplot per collective and world size

How to read the bandwidth table: time is the slowest rank's mean per call
(tide-perf's convention, which the other drivers copy), from the faster of
the run's passes; "x peer" is the peer's time divided by tide's, so above
1 tide is faster.  The anchor table is issue 3's yardstick: the 2-rank
allreduce at the sizes it quotes, with its target (at least Open MPI
TCP's speed; from 16 MiB at least 1.5x its bus bandwidth, which at one
size is the same ratio of times).  The anchors need a 2-rank run:
without one (compare.sh --ranks without 2) that table is left out.  The
overlap table shows the range over the passes.  The loopback
column sets tide against the machine: for sizes of 1 MiB and up, tide's
bus bandwidth as a share of what raw sockets carry in the same pattern (a
ring of N processes each sending while receiving; broadcast on 2 ranks is
one stream); below that, tide's time in raw 8-byte round trips (the
faster of busy-polling and blocking at the time of the run).  The raw
figures are plain blocking-socket loops, best of 5: io_uring can beat them.
The header line says where the ranks ran (compare.sh --placement, from
run.json; "not recorded" for runs from before it was) and how each
launcher was told to place them.
"""
import glob
import json
import os
import sys

PEERS = ("ompi-tcp", "ompi-sm", "gloo")
SYSTEMS = ("tide", "tide-epoll", "tide-shm") + PEERS
LABELS = {"tide": "tide", "tide-epoll": "tide epoll", "tide-shm": "tide shm",
          "ompi-tcp": "Open MPI tcp", "ompi-sm": "Open MPI sm", "gloo": "Gloo"}
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast")
# The loopback column switches from latency to bandwidth here: below it a
# transfer fits the socket buffers and the streaming ceiling is no ceiling.
BANDWIDTH_FROM = 1 << 20
# Issue 3's anchors (2-rank float32 sum allreduce) and where its target
# rises from "as fast as Open MPI TCP" to 1.5x its bus bandwidth.
ANCHORS = (8, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
BUSBW_TARGET_FROM = 16 << 20


def system_of(rec):
    """tide-perf and tide-overlap are "tide-shm" over shared memory, else
    "tide" on io_uring and "tide-epoll" on epoll, both over TCP (their
    records name the transport and reactor that ran); the drivers name
    themselves."""
    if not rec["tool"].startswith("tide-"):
        return rec["tool"]
    if rec.get("transport") == "shm":
        return "tide-shm"
    return "tide-epoll" if rec.get("reactor") == "epoll" else "tide"


def load(out_dir):
    records, facts = [], {}
    for path in sorted(glob.glob(os.path.join(out_dir, "raw", "*.json"))):
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict):  # compare.sh's facts about the run
            facts.update(data)
        else:
            records.extend(data)
    return records, facts


def size_text(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def time_text(us):
    if us is None:
        return "n/a"
    return f"{us:.0f}" if us >= 100 else f"{us:.1f}"


def limits_of(records):
    """Loopback ceilings, the best over the run's passes: (test, ranks) ->
    GB/s (the highest) or round-trip us (the lowest); "rtt" is the faster
    of the two round trips."""
    lim = {}
    for r in records:
        if r["tool"] != "loopback":
            continue
        key = (r["test"], r["ranks"])
        if "gbps" in r:
            lim[key] = max(lim.get(key, 0.0), r["gbps"])
        else:
            lim[key] = min(lim.get(key, float("inf")), r["time_us"])
            lim["rtt"] = min(lim.get("rtt", float("inf")), r["time_us"])
    return lim


def link_limit(lim, op, ranks):
    if op == "broadcast" and ranks == 2:
        return lim.get(("stream", 2))
    return lim.get(("ring", ranks))


def perf_index(records):
    """(system, op, ranks, bytes) -> the fastest record over the passes, out
    of place where there is a choice (tide-perf measures both)."""
    index = {}
    for r in records:
        if "time_us" not in r or r["tool"] == "loopback" or r.get("bytes", 0) == 0:
            continue
        key = (system_of(r), r["op"], r["ranks"], r["bytes"])
        old = index.get(key)
        rank = (bool(r.get("inplace")), r["time_us"])
        if old is None or rank < (bool(old.get("inplace")), old["time_us"]):
            index[key] = r
    return index


def bandwidth_rows(records):
    index, lim = perf_index(records), limits_of(records)
    rows = []
    for op in OPS:
        for ranks in sorted({k[2] for k in index if k[1] == op}):
            for nbytes in sorted({k[3] for k in index if k[1] == op and k[2] == ranks}):
                got = {s: index.get((s, op, ranks, nbytes)) for s in SYSTEMS}
                tide = got["tide"]
                row = {"op": op, "ranks": ranks, "bytes": nbytes,
                       "time_us": {s: r and r["time_us"] for s, r in got.items()},
                       "busbw_gbps": {s: r and r["busbw_gbps"] for s, r in got.items()},
                       "ratio": {}, "loopback": None}
                for p in PEERS + ("tide-epoll",):
                    if tide and got[p]:
                        row["ratio"][p] = got[p]["time_us"] / tide["time_us"]
                if got["tide-epoll"] and got["ompi-tcp"]:
                    row["epoll_vs_ompi_tcp"] = got["ompi-tcp"]["time_us"] / got["tide-epoll"]["time_us"]
                if got["tide-shm"] and got["ompi-sm"]:
                    row["shm_vs_ompi_sm"] = got["ompi-sm"]["time_us"] / got["tide-shm"]["time_us"]
                limit = link_limit(lim, op, ranks)
                if tide and nbytes >= BANDWIDTH_FROM and limit:
                    row["loopback"] = {"busbw_share": tide["busbw_gbps"] / limit}
                elif tide and nbytes < BANDWIDTH_FROM and lim.get("rtt"):
                    row["loopback"] = {"rtts": tide["time_us"] / lim["rtt"]}
                rows.append(row)
    return rows


def overlap_rows(records):
    """One row per (ranks, size, compute); each system's overlap % from
    every pass (a range in the table), and its shortest t_pure."""
    index = {}
    for r in records:
        if "overlap_pct" in r:
            index.setdefault((system_of(r), r["ranks"], r["bytes"], r["compute"]), []).append(r)
    rows = []
    for ranks, nbytes, compute in sorted({k[1:] for k in index}, key=lambda k: (k[2], k[0], k[1])):
        got = {s: index.get((s, ranks, nbytes, compute), []) for s in SYSTEMS}
        rows.append({"ranks": ranks, "bytes": nbytes, "compute": compute,
                     "overlap_pct": {s: sorted(r["overlap_pct"] for r in rs)
                                     for s, rs in got.items()},
                     "t_pure_us": {s: min((r["t_pure_us"] for r in rs), default=None)
                                   for s, rs in got.items()}})
    return rows


def loopback_text(row):
    lb = row["loopback"]
    if not lb:
        return "n/a"
    if "busbw_share" in lb:
        return f"{100 * lb['busbw_share']:.0f} % of link"
    return f"{lb['rtts']:.1f} RTT"


def bandwidth_table(rows):
    head = (["op", "ranks", "size"] + [f"{LABELS[s]} µs" for s in SYSTEMS]
            + [f"x {LABELS[p]}" for p in PEERS] + ["epoll / io_uring", "shm: x Open MPI sm",
                                                  "tide vs loopback"])
    body = []
    for r in rows:
        body.append([r["op"], str(r["ranks"]), size_text(r["bytes"])]
                    + [time_text(r["time_us"][s]) for s in SYSTEMS]
                    + [f"{r['ratio'][p]:.2f}" if p in r["ratio"] else "n/a"
                       for p in PEERS + ("tide-epoll",)]
                    + [f"{r['shm_vs_ompi_sm']:.2f}" if "shm_vs_ompi_sm" in r else "n/a"]
                    + [loopback_text(r)])
    return head, body


# The reactors issue's targets: epoll within 1.3x of io_uring at every
# size, and still ahead of Open MPI over TCP from 1 MiB.
EPOLL_SLOWER_AT_MOST = 1.3
EPOLL_AHEAD_FROM = 1 << 20


def epoll_lines(rows):
    """How the epoll reactor stands against io_uring and Open MPI TCP."""
    both = [r for r in rows if "tide-epoll" in r["ratio"]]
    if not both:
        return []
    slow = [r for r in both if r["ratio"]["tide-epoll"] > EPOLL_SLOWER_AT_MOST]
    big = [r for r in both if r["bytes"] >= EPOLL_AHEAD_FROM and "epoll_vs_ompi_tcp" in r]
    behind = [r for r in big if r["epoll_vs_ompi_tcp"] < 1.0]
    ratios = sorted(r["ratio"]["tide-epoll"] for r in both)
    where = lambda rs: ", ".join(f"{r['op']} {r['ranks']}r {size_text(r['bytes'])} "
                                 f"{r['ratio']['tide-epoll']:.2f}x" for r in rs)
    out = [f"epoll / io_uring time: {ratios[0]:.2f}-{ratios[-1]:.2f}x "
           f"(median {ratios[len(ratios) // 2]:.2f}) over {len(both)} points; "
           f"{len(both) - len(slow)} within {EPOLL_SLOWER_AT_MOST}x"]
    if slow:
        out.append(f"slower than {EPOLL_SLOWER_AT_MOST}x: {where(slow)}")
    out.append(f"epoll at least as fast as Open MPI tcp from 1 MiB: {len(big) - len(behind)} "
               f"of {len(big)} points")
    if behind:
        out.append("behind: " + ", ".join(f"{r['op']} {r['ranks']}r {size_text(r['bytes'])} "
                                          f"{r['epoll_vs_ompi_tcp']:.2f}x" for r in behind))
    return out


# The shared-memory issue's targets against Open MPI's vader: at least as
# fast from 4 KiB, twice as fast at 16-64 MiB, a 2-rank 8 B allreduce
# within 2 µs.
SHM_AHEAD_FROM = 4 << 10
SHM_TWICE = (16 << 20, 64 << 20)


def shm_lines(rows):
    """How tide over shared memory stands against Open MPI's vader."""
    both = [r for r in rows if "shm_vs_ompi_sm" in r]
    if not both:
        return []
    big = [r for r in both if r["bytes"] >= SHM_AHEAD_FROM]
    behind = [r for r in big if r["shm_vs_ompi_sm"] < 1.0]
    huge = [r for r in both if SHM_TWICE[0] <= r["bytes"] <= SHM_TWICE[1]]
    short = [r for r in huge if r["shm_vs_ompi_sm"] < 2.0]
    where = lambda rs: ", ".join(f"{r['op']} {r['ranks']}r {size_text(r['bytes'])} "
                                 f"{r['shm_vs_ompi_sm']:.2f}x" for r in rs)
    small = [r for r in both if r["op"] == "allreduce" and r["ranks"] == 2 and r["bytes"] == 8]
    out = [f"at least as fast as Open MPI sm from 4 KiB: {len(big) - len(behind)} of "
           f"{len(big)} points", f"twice as fast at 16-64 MiB: {len(huge) - len(short)} of "
           f"{len(huge)} points"]
    if behind:
        out.append("behind from 4 KiB: " + where(behind))
    if short:
        out.append("under 2x at 16-64 MiB: " + where(short))
    if small:
        out.append(f"2-rank 8 B allreduce: {small[0]['time_us']['tide-shm']:.2f} µs "
                   f"(Open MPI sm {small[0]['time_us']['ompi-sm']:.2f})")
    return out


def anchor_rows(rows):
    return [r for r in rows
            if r["op"] == "allreduce" and r["ranks"] == 2 and r["bytes"] in ANCHORS]


def anchor_table(rows):
    head = ["size", "tide µs", "tide busbw GB/s", "Open MPI tcp µs", "Open MPI tcp busbw GB/s",
            "Gloo µs", "x Open MPI tcp", "target", "met"]
    body = []
    for r in rows:
        ratio = r["ratio"].get("ompi-tcp")
        target = 1.5 if r["bytes"] >= BUSBW_TARGET_FROM else 1.0
        bus = lambda s: f"{r['busbw_gbps'][s]:.2f}" if r["busbw_gbps"][s] else "n/a"
        body.append([size_text(r["bytes"]), time_text(r["time_us"]["tide"]), bus("tide"),
                     time_text(r["time_us"]["ompi-tcp"]), bus("ompi-tcp"),
                     time_text(r["time_us"]["gloo"]),
                     f"{ratio:.2f}" if ratio else "n/a", f"{target:.1f}",
                     "n/a" if ratio is None else ("yes" if ratio >= target else "no")])
    return head, body


def overlap_table(rows):
    head = (["ranks", "size", "compute"] + [f"{LABELS[s]} %" for s in SYSTEMS]
            + ["tide t_pure µs"])
    body = []
    for r in rows:
        pct = r["overlap_pct"]
        body.append([str(r["ranks"]), size_text(r["bytes"]), r["compute"]]
                    + [pct_range(pct[s]) for s in SYSTEMS]
                    + [time_text(r["t_pure_us"]["tide"])])
    return head, body


def pct_range(values):
    if not values:
        return "n/a"
    lo, hi = f"{values[0]:.0f}", f"{values[-1]:.0f}"
    return lo if lo == hi else f"{lo}–{hi}"


def torch_rows(records):
    """tide's torch.distributed backend beside Gloo's, allreduce per
    (ranks, size): each one's fastest pass."""
    index = perf_index(records)
    rows = []
    for ranks, nbytes in sorted({(k[2], k[3]) for k in index if k[0] == "torch-tide"}):
        tide, gloo = index.get(("torch-tide", "allreduce", ranks, nbytes)), \
            index.get(("gloo", "allreduce", ranks, nbytes))
        rows.append({"ranks": ranks, "bytes": nbytes,
                     "time_us": {"torch-tide": tide and tide["time_us"],
                                 "gloo": gloo and gloo["time_us"]},
                     "ratio": gloo["time_us"] / tide["time_us"] if tide and gloo else None})
    return rows


def ddp_rows(records):
    """DDP step time per (ranks, backend): every pass, and the median."""
    runs = {}
    for r in records:
        if r.get("tool") == "ddp":
            runs.setdefault((r["ranks"], r["backend"]), []).append(r["ms_per_step"])
    rows = []
    for ranks in sorted({k[0] for k in runs}):
        row = {"ranks": ranks, "ms_per_step": {}, "median": {}}
        for backend in ("tide", "gloo"):
            got = sorted(runs.get((ranks, backend), []))
            row["ms_per_step"][backend] = got
            row["median"][backend] = got[len(got) // 2] if got else None
        tide, gloo = row["median"]["tide"], row["median"]["gloo"]
        row["ratio"] = gloo / tide if tide and gloo else None
        rows.append(row)
    return rows


def torch_table(rows):
    head = ["ranks", "size", "torch tide µs", "torch Gloo µs", "x Gloo"]
    return head, [[str(r["ranks"]), size_text(r["bytes"]), time_text(r["time_us"]["torch-tide"]),
                   time_text(r["time_us"]["gloo"]),
                   f"{r['ratio']:.2f}" if r["ratio"] else "n/a"] for r in rows]


def ddp_table(rows):
    head = ["ranks", "tide ms/step", "Gloo ms/step", "x Gloo (medians)"]
    runs = lambda v: ", ".join(f"{x:.2f}" for x in v) or "n/a"
    return head, [[str(r["ranks"]), runs(r["ms_per_step"]["tide"]), runs(r["ms_per_step"]["gloo"]),
                   f"{r['ratio']:.2f}" if r["ratio"] else "n/a"] for r in rows]


def limits_lines(records):
    lim, out = limits_of(records), []
    order = ("stream", "ring", "rtt_busy_poll", "rtt_blocking", "memcpy")
    keys = sorted((k for k in lim if k != "rtt"), key=lambda k: (order.index(k[0]), k[1]))
    for (test, ranks), v in ((k, lim[k]) for k in keys):
        if test == "stream":
            out.append(f"one TCP stream {v:.2f} GB/s")
        elif test == "ring":
            what = "both directions at once" if ranks == 2 else f"ring of {ranks}"
            out.append(f"{what} {v:.2f} GB/s per link")
        elif test.startswith("rtt"):
            how = "busy-poll" if test == "rtt_busy_poll" else "blocking"
            out.append(f"8 B round trip {v:.1f} µs ({how})")
        elif test == "memcpy":
            out.append(f"memcpy {v:.1f} GB/s")
    return out


def readme_cut(rows):
    """Every other size of the sweep (8 B, 128 B, 2 KiB, ... 16x apart) and
    the largest, so the README's table stays readable."""
    largest = max((r["bytes"] for r in rows), default=0)
    keep = lambda n: n == largest or (n % 8 == 0 and (n // 8) & (n // 8 - 1) == 0
                                      and ((n // 8).bit_length() - 1) % 4 == 0)
    return [r for r in rows if keep(r["bytes"])]


def overlap_cut(rows):
    """The overlap sweep at 64 KiB, 1 MiB and 16 MiB."""
    return [r for r in rows if r["bytes"] in (64 << 10, 1 << 20, 16 << 20)]


def about_lines(facts):
    """The run's facts in two lines: when, where and how loaded; and where
    the ranks ran (compare.sh --placement and each launcher's options; None
    for runs from before compare.sh recorded them)."""
    about = (f"{facts.get('date', '?')}, {facts.get('machine', '?')}; "
             f"Open MPI {facts.get('ompi_version', '?')}, torch {facts.get('torch_version', '?')}; "
             f"1-minute load {facts.get('load1_before', '?')} before, "
             f"{facts.get('load1_after', '?')} after; {facts.get('seconds', '?')} s; "
             f"placement {facts.get('placement', 'not recorded')}")
    launch = facts.get("launch")
    if not launch:
        return about, None
    mpirun = launch.get("mpirun", {}).get("options", {})
    return about, (f"launchers: tide-run {launch.get('tide-run', {}).get('options', '?')}; "
                   "mpirun " + ", ".join(f"{n} ranks {mpirun[n]}" for n in sorted(mpirun, key=int)))


def text_table(head, body):
    widths = [max(len(c) for c in col) for col in zip(head, *body)]
    fmt = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([fmt(head)] + [fmt(r) for r in body])


def md_table(head, body):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def plot(rows, records, path):
    import matplotlib
    matplotlib.use("Agg")  # no display here; write the PNG only
    import matplotlib.pyplot as plt
    lim = limits_of(records)
    panels = sorted({(r["op"], r["ranks"]) for r in rows}, key=lambda k: (OPS.index(k[0]), k[1]))
    worlds = sorted({p[1] for p in panels}) or [2]  # one column per world size, 24 in at most
    fig, axes = plt.subplots(len(OPS), len(worlds), squeeze=False,
                             figsize=(min(5.5, 24 / len(worlds)) * len(worlds), 3.3 * len(OPS)))
    for ax in axes.flat:
        ax.set_visible(False)
    for op, ranks in panels:
        ax = axes[OPS.index(op)][worlds.index(ranks)]
        ax.set_visible(True)
        mine = [r for r in rows if r["op"] == op and r["ranks"] == ranks]
        for s in SYSTEMS:
            pts = [(r["bytes"], r["busbw_gbps"][s]) for r in mine if r["busbw_gbps"][s]]
            if pts:
                ax.plot(*zip(*pts), marker="o", markersize=3, label=LABELS[s])
        limit = link_limit(lim, op, ranks)
        if limit:
            ax.axhline(limit, color="grey", linestyle="--", linewidth=1, label="loopback link")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # small sizes are latency-bound: a linear axis hides them
        ax.set_title(f"{op}, {ranks} ranks")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    records, facts = load(out_dir)
    bw, ov = bandwidth_rows(records), overlap_rows(records)
    bw_table, ov_table = bandwidth_table(bw), overlap_table(ov)
    anchors = anchor_rows(bw)
    limits = limits_lines(records)
    about, launch = about_lines(facts)
    header = about + (f"\n{launch}" if launch else "")
    if anchors:
        print(f"== issue 3's anchors: 2-rank allreduce, float32 sum ==\n{header}")
        print(text_table(*anchor_table(anchors)))
    else:
        print(f"== issue 3's anchors: none (they are 2-rank runs, and this run had no 2) ==\n"
              f"{header}")
    print("\n== collectives, float32 sum: µs per call (x peer = peer time / tide time) ==")
    print(text_table(*bw_table))
    epoll = epoll_lines(bw)
    if epoll:
        print("\n== the epoll reactor against io_uring and Open MPI tcp ==\n" + "\n".join(epoll))
    shm = shm_lines(bw)
    if shm:
        print("\n== shared memory against Open MPI sm (vader) ==\n" + "\n".join(shm))
    print("\n== overlap of a nonblocking allreduce with compute, % (OSU method) ==")
    print(text_table(*ov_table))
    tr, dr = torch_rows(records), ddp_rows(records)
    print("\n== torch.distributed all_reduce, float32 sum: backend tide vs Gloo, µs per call ==")
    print(text_table(*torch_table(tr)))
    print("\n== DDP training (tools/ddp_demo.py): ms per step, each pass ==")
    print(text_table(*ddp_table(dr)))
    print("\n== loopback limits ==\n" + "; ".join(limits))
    for name, bw_rows, ov_rows in (("table-full.md", bw, ov),
                                   ("table.md", readme_cut(bw), overlap_cut(ov))):
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(f"{about}.\n\n" + (f"{launch}.\n\n" if launch else ""))
            if anchors:
                f.write(f"Anchors (2-rank allreduce):\n\n{md_table(*anchor_table(anchors))}\n\n")
            f.write(f"{md_table(*bandwidth_table(bw_rows))}\n\nOverlap (%):\n\n"
                    f"{md_table(*overlap_table(ov_rows))}\n\ntorch.distributed all_reduce "
                    f"(µs):\n\n{md_table(*torch_table(tr))}\n\nDDP (ms/step):\n\n"
                    f"{md_table(*ddp_table(dr))}\n\nLoopback limits: "
                    f"{'; '.join(limits)}.\n")
            if epoll:
                f.write("\nThe epoll reactor: " + "; ".join(epoll) + ".\n")
            if shm:
                f.write("\nShared memory: " + "; ".join(shm) + ".\n")
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump({"facts": facts, "anchors": anchors, "bandwidth": bw, "overlap": ov,
                   "epoll": epoll, "shm": shm, "torch": tr, "ddp": dr, "records": records}, f, indent=1)
        f.write("\n")
    try:
        plot(bw, records, os.path.join(out_dir, "compare.png"))
    except ImportError:
        print("compare_report: no matplotlib, no plot (apt-get install python3-matplotlib)",
              file=sys.stderr)
    print(f"\nwrote {out_dir}/compare.json, table.md, table-full.md, compare.png")


if __name__ == "__main__":
    main()
