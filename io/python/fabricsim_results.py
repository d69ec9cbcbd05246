#!/usr/bin/python3
"""Reads fabricsim HDF5 results files (docs/hdf5_schema.md) with h5py only.

  fabricsim_results.py report RUN.h5 [-o DIR]   PNG plots + index.html embedding them
  fabricsim_results.py compare A.h5 B.h5        key metrics side by side with relative differences

`fabricsim report` and `fabricsim compare` run this file with /usr/bin/python3 (Debian's
python3-h5py, python3-matplotlib, python3-numpy). Exit codes: 0 ok, 2 bad input (one line on
stderr: file, problem, fix), 3 internal error.
"""
import argparse
import html
import os
import re
import sys


def fail(where, problem, fix, code=2):
    print(f"fabricsim: error: {where}: {problem}; {fix}", file=sys.stderr)
    sys.exit(code)


try:
    import numpy as np
    import h5py
except ImportError as e:  # pragma: no cover - depends on the machine
    fail("python", f"{e.name} is not importable by {sys.executable}",
         "install Debian's python3-h5py (scripts/setup.sh) and use /usr/bin/python3")

PS_PER_US = 1e6


def one_line(e):
    """An exception's message on one line (h5py's can span several)."""
    return " ".join(str(e).split())


def load(path):
    """The file's tables as numpy structured arrays plus /meta as a dict.

    Every read happens here, so a damaged file (truncated, bytes overwritten: h5py raises OSError,
    or KeyError/ValueError/RuntimeError for broken object headers) is one line naming the file,
    exit 2, instead of an internal error half way through a plot."""
    if not os.path.isfile(path):
        fail(path, "no such file", "give the HDF5 file written by fabricsim run -o")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        msg = one_line(e)
        what = "a truncated HDF5 file" if "truncated file" in msg else "not a readable HDF5 file"
        fail(path, f"{what} ({msg})", "give the complete HDF5 file written by fabricsim run -o")
    try:
        with f:
            if "meta" not in f or "ranks" not in f:
                fail(path, "has no /meta or /ranks", "give a fabricsim results file (docs/hdf5_schema.md)")
            meta = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f["meta"].attrs.items()}
            d = {"meta": meta, "path": path}
            for name in ("ranks", "collectives", "flows", "links", "queues", "link_totals", "jobs"):
                d[name] = f[name][:] if name in f else None
    except (OSError, KeyError, ValueError, RuntimeError, TypeError, UnicodeDecodeError) as e:
        fail(path, f"the HDF5 file is damaged: reading it failed ({type(e).__name__}: {one_line(e)})",
             "the file is corrupt or was cut short; run fabricsim run -o again to rewrite it")
    for name, cols in REQUIRED_COLUMNS.items():
        t = d[name]
        if t is None:
            continue
        missing = [c for c in cols if t.dtype.names is None or c not in t.dtype.names]
        if missing:
            fail(path, f"/{name} has no column {missing[0]}",
                 "give a fabricsim results file (docs/hdf5_schema.md); the file may be damaged")
    return d


# Columns report/compare read from each table (docs/hdf5_schema.md).
REQUIRED_COLUMNS = {
    "ranks": ("rank", "compute_ps", "comm_ps", "exposed_comm_ps"),
    "collectives": ("op", "bytes", "ranks", "busbw_GBps"),
    "flows": ("src", "dst", "start_ps", "fct_ps"),
    "links": ("link_id", "tier", "bin_start_ps", "bytes", "utilization"),
    "queues": ("link_id", "tier", "from_node", "to_node", "bin_start_ps", "max_queue_bytes"),
}


def pct(a, q):
    return float(np.percentile(a, q)) if len(a) else float("nan")


def fabric_counters(meta):
    """The /meta fabric_<counter> attributes (schema 3, packet-level runs) as {counter: int}."""
    return {k[len("fabric_"):]: int(v) for k, v in meta.items() if k.startswith("fabric_")}


def node_name(n, ranks):
    """LP id -> label: GPUs are LPs 0..ranks-1 (`gpu<r>`), switches follow (`sw<id>`)."""
    return f"gpu{n}" if n < ranks else f"sw{n}"


def gpus_per_host(meta):
    m = re.search(r"gpus_per_host:\s*(\d+)", meta.get("spec_text", ""))
    return int(m.group(1)) if m else 8


# ------------------------------------------------------------------------------------------------
# report
#
# Figures are built by `figures(d)` (no file is written there, so tests can read the matplotlib
# Figure objects) and saved by `report(args)`. Every figure carries its one-line caption as a
# figure text with gid "caption"; every axis label names its unit in parentheses.

# More distinct series than this in one plot are drawn as percentile bands (p50 / p90 / max across
# the group) instead of one line per distinct series.
MAX_DISTINCT_LINES = 6
# Largest idle stretches cut out of a time axis (more breaks would crowd its tick labels).
MAX_TIME_BREAKS = 8


def time_unit(span_ps):
    """(divisor, name) for a time axis up to span_ps: ms from 2 ms on, else us."""
    return (1e9, "ms") if span_ps >= 2e9 else (PS_PER_US, "us")


class TimeAxis:
    """Simulated time (ps) -> plot coordinate (ps of active time) for the plots over time.

    The axis spans the bins that carry traffic (`active_bins`, bin indices of width `bin_ps`),
    from the first to the last; an idle stretch of at least max(3 bins, 5% of the active bins, 3%
    of that span) is cut out (at most MAX_TIME_BREAKS, the longest) and drawn as a narrow break (dashed line), so a
    run whose traffic is a few bursts in a long step shows the bursts, not one stripe. Tick labels
    give the simulated time."""

    def __init__(self, active_bins, bin_ps, span_ps):
        self.bin_ps = int(bin_ps)
        b = np.unique(np.asarray(active_bins, dtype=np.int64))
        if not len(b):
            self.segments = [(0, max(int(span_ps), self.bin_ps))]
        else:
            min_gap = max(3, int(np.ceil(0.05 * len(b))), int(np.ceil(0.03 * (b[-1] - b[0] + 1))))
            gaps = np.diff(b) - 1  # idle bins between consecutive active bins
            cut = np.flatnonzero(gaps >= min_gap)
            if len(cut) > MAX_TIME_BREAKS:
                cut = np.sort(cut[np.argsort(-gaps[cut], kind="stable")[:MAX_TIME_BREAKS]])
            starts = np.concatenate(([b[0]], b[cut + 1]))
            ends = np.concatenate((b[cut], [b[-1]])) + 1
            self.segments = [(int(s) * self.bin_ps, int(e) * self.bin_ps) for s, e in zip(starts, ends)]
        active = sum(e - s for s, e in self.segments)
        self.brk = max(active // 60, 1) if len(self.segments) > 1 else 0  # width of one break
        self.offsets = []
        o = self.segments[0][0]  # one segment: plot coordinate = simulated time
        for s, e in self.segments:
            self.offsets.append(o)
            o += (e - s) + self.brk
        self.start = self.segments[0][0]
        self.length = o - self.brk  # the axis end (plot coordinate)
        real_span = self.segments[-1][1] - self.segments[0][0]
        self.div, self.unit = time_unit(self.segments[-1][1])
        self.cut_ps = real_span - active  # idle time left out
        self.run_ps = max(int(span_ps), self.segments[-1][1])

    def map(self, t_ps):
        """Plot coordinates of times (ps); a time inside a cut maps to the middle of its break,
        one before the first / after the last segment to the axis end."""
        t = np.asarray(t_ps, dtype=np.float64)
        starts = np.array([s for s, _ in self.segments], dtype=np.float64)
        ends = np.array([e for _, e in self.segments], dtype=np.float64)
        offs = np.array(self.offsets, dtype=np.float64)
        k = np.searchsorted(starts, t, side="right") - 1
        kc = np.maximum(k, 0)
        inside = t < ends[kc]
        after = offs[kc] + (ends[kc] - starts[kc]) + self.brk / 2.0  # in the break after segment k
        out = np.where(inside, offs[kc] + (t - starts[kc]), after)
        out = np.where(k < 0, float(self.start), out)
        return np.minimum(out, float(self.length))

    def unmap(self, c):
        """Simulated time (ps) of plot coordinate c, or None inside a break."""
        for (s, e), o in zip(self.segments, self.offsets):
            if c <= o + (e - s):
                return s + max(c - o, 0) if c >= o else None
        return self.segments[-1][1]

    def label(self):
        """'simulated time (ms; traffic from 322.7 to 327.4 of the 327.4 ms run; 2 idle stretches
        ... cut out at the dashed lines)'; the span part only when it leaves out more than 5%."""
        s, e = self.segments[0][0], self.segments[-1][1]
        span = (f"; with traffic: {s / self.div:.5g} to {e / self.div:.5g} of the {self.run_ps / self.div:.5g} "
                f"{self.unit} run") if (e - s) < 0.95 * self.run_ps else ""
        cut = (f"; {len(self.segments) - 1} idle stretches ({fmt_ps(self.cut_ps)}) cut out at the dashed lines"
               if len(self.segments) > 1 else "")
        return f"simulated time ({self.unit}{span}{cut})"

    def apply(self, ax, xlabel=True):
        """Limits, tick labels in simulated time, break markers and (optionally) the x label.
        Ticks are round simulated times inside each segment (about 8 in all)."""
        from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator
        ax.set_xlim(self.start, self.length)
        span = self.length - self.start
        # Round times inside each segment, longest segments first; a tick closer than 1/9 of the
        # axis to one already kept is dropped (short segments between breaks would crowd).
        cand = []
        for (s, e), o in sorted(zip(self.segments, self.offsets), key=lambda so: so[0][0] - so[0][1]):
            n = max(1, int(round(8 * (e - s) / span)))
            v = MaxNLocator(nbins=n).tick_values(s / self.div, e / self.div) * self.div
            cand += [o + (t - s) for t in v if s <= t <= e]
        ticks = []
        for t in cand:
            if all(abs(t - k) >= span / 9.0 for k in ticks):
                ticks.append(t)
        ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))

        def fmt(c, _pos):
            t = self.unmap(c)
            return "" if t is None else f"{t / self.div:.5g}"
        ax.xaxis.set_major_formatter(FuncFormatter(fmt))
        for o in self.offsets[1:]:
            ax.axvline(o - self.brk / 2.0, color="0.5", ls="--", lw=0.8)
        if xlabel:
            ax.set_xlabel(self.label())

    def edges(self, ncols_max=400):
        """Column edges (plot coordinates) of a heatmap on this axis: whole bins, at most
        ncols_max columns per the active length (breaks get no column)."""
        group = max(1, int(np.ceil(((self.length - self.start) // self.bin_ps + 1) / ncols_max)))
        return group * self.bin_ps


def group_identical(series, key=None):
    """Groups series (name, x, y) that coincide: equal key(x, y) (default: x and y equal element
    for element). Returns [(names, x, y, exact)], largest group first, ties in input order; exact
    tells whether the group's members are equal element for element."""
    groups = {}
    for name, x, y in series:
        k = key(x, y) if key else (np.asarray(x).tobytes(), np.asarray(y).tobytes())
        exact_k = (np.asarray(x).tobytes(), np.asarray(y).tobytes())
        if k in groups:
            groups[k][0].append(name)
            groups[k][3].add(exact_k)
        else:
            groups[k] = ([name], x, y, {exact_k})
    return [(n, x, y, len(e) == 1) for n, x, y, e in sorted(groups.values(), key=lambda g: -len(g[0]))]


def names_text(names, one, many, ids, exact=True, max_names=4):
    """Legend label of a group of series: one(name) for a single series, else
    '16 NICs, identical (ranks 0, 8, 16, ... 120)' ('coinciding' when only equal as drawn)."""
    if len(names) == 1:
        return one(names[0])
    head = ", ".join(str(n) for n in names[:max_names - 1])
    tail = f", ... {names[-1]}" if len(names) > max_names else "".join(f", {n}" for n in names[max_names - 1:])
    return f"{len(names)} {many}, {'identical' if exact else 'coinciding'} ({ids} {head}{tail})"


def plot_grouped(ax, series, one, many, ids, draw, bands, key=None):
    """Draws series (name, x, y): coinciding ones (group_identical with `key`) once, labelled
    with their count (names_text); more than MAX_DISTINCT_LINES groups as percentile bands, via
    bands(ax, series, groups). draw(ax, x, y, label, i) draws one line. Returns 'lines' or
    'bands'."""
    groups = group_identical(series, key)
    if len(groups) <= MAX_DISTINCT_LINES:
        for i, (names, x, y, exact) in enumerate(groups):
            draw(ax, x, y, names_text(names, one, many, ids, exact), i)
        return "lines"
    bands(ax, series, groups)
    return "bands"


def fmt_ps(ps):
    """A duration in ps as text with a readable unit (ns, us, ms, s)."""
    for div, unit in ((1e12, "s"), (1e9, "ms"), (1e6, "us")):
        if abs(ps) >= div:
            return f"{ps / div:.4g} {unit}"
    return f"{ps / 1e3:.4g} ns"


def caption(fig, text):
    """The figure's one-line caption, under the axes (gid 'caption', read by the tests)."""
    fig.text(0.01, -0.01, text, ha="left", va="top", fontsize=8.5, style="italic", gid="caption",
             wrap=True)


def figure_caption(fig):
    """The caption text of a figure built by figures(), or None."""
    for t in fig.texts:
        if t.get_gid() == "caption":
            return t.get_text()
    return None


def figures(d):
    """The report's figures of a loaded results file: ([(file name, Figure, title, caption)],
    [(None, title, note)] for sections without a plot). Needs matplotlib (Agg)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    meta = d["meta"]
    iter_ps = int(meta.get("simulated_time_ps", 0))
    nranks = int(meta.get("ranks", 0))
    bw = int(meta.get("sample_interval_ps", 0)) or 1
    out, notes = [], []

    def add(fig, name, title, cap):
        caption(fig, cap)
        out.append((name, fig, title, cap))

    li = d["links"]
    li_names = li.dtype.names if li is not None else ()
    busy = li[li["bytes"] > 0] if li is not None and len(li) else None
    # Bins with traffic on any link, PFC pauses, ECN marks or drops: the time axis of every plot
    # over time (so they line up with each other).
    active = np.zeros(0, dtype=np.int64)
    if li is not None and len(li):
        active = (li["bin_start_ps"] // bw).astype(np.int64)
    tax = TimeAxis(active, bw, iter_ps)

    # 1. Step breakdown per rank.
    r = d["ranks"]
    div, unit = time_unit(iter_ps)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    kinds = [("TP", "exposed_tp_ps", "#dd8452"), ("DP", "exposed_dp_ps", "#c44e52"), ("EP", "exposed_ep_ps", "#8172b3"),
             ("PP", "exposed_pp_ps", "#937860"), ("CP", "exposed_cp_ps", "#da8bc3"),
             ("other", "exposed_other_ps", "#8c8c8c")]
    has_kinds = all(col in r.dtype.names for col in [k[1] for k in kinds] + ["bubble_ps", "pp_wait_ps"])
    if len(r):
        x = r["rank"]
        bottom = np.zeros(len(r))
        segs = [("compute", r["compute_ps"].astype(float), "#4c72b0")]
        if has_kinds:
            for k, col, colr in kinds:
                v = r[col].astype(float)
                if k == "PP":
                    v = v - r["pp_wait_ps"]  # the waits are in the bubble
                if v.max() > 0:
                    segs.append((f"exposed {k} communication", v, colr))
            segs.append(("bubble / idle", r["bubble_ps"].astype(float), "#cccccc"))
        else:
            segs.append(("exposed communication", r["exposed_comm_ps"].astype(float), "#dd8452"))
            segs.append(("idle", np.maximum(iter_ps - r["compute_ps"] - r["exposed_comm_ps"], 0).astype(float),
                         "#cccccc"))
        for label, v, colr in segs:
            share = 100.0 * v.mean() / iter_ps if iter_ps else 0.0
            ax.bar(x, v / div, width=1.0, bottom=bottom / div, color=colr,
                   label=f"{label}: mean {fmt_ps(v.mean())} ({share:.1f}%)")
            bottom += v
        ax.plot(x, r["comm_ps"] / div, "k.", ms=3, label="all communication, overlapped too")
        ax.set_xlim(-0.5, len(r) - 0.5)
    ax.set_xlabel("rank (GPU index)")
    ax.set_ylabel(f"time in the run ({unit})")
    ax.set_title(f"Where the time went, per rank (run {iter_ps / div:.4g} {unit})")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    add(fig, "breakdown.png", "Step breakdown per rank",
        "Stacked per rank: compute, communication not hidden behind compute (by group kind) and "
        "bubble/idle time add up to the run time; dots: all communication time.")

    # 2. busbw vs size: one marker per distinct (op, size, busbw), its size growing with the count.
    c = d["collectives"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    n_trivial = 0
    if c is not None and len(c):
        n_trivial = int((c["ranks"] <= 1).sum())
        c = c[c["ranks"] > 1]
        # Distinct marker shapes, later ones hollow, so ops at the same point stay visible.
        for i, op in enumerate(sorted(set(c["op"].tolist()))):
            s = c[c["op"] == op]
            keys, cnt = np.unique(np.stack([s["bytes"].astype(float), np.round(s["busbw_GBps"], 2)]), axis=1,
                                  return_counts=True)
            colr = f"C{i % 10}"
            ax.scatter(keys[0], keys[1], s=16 + 60 * np.sqrt(cnt / cnt.max()), marker="osD^vP*X"[i % 8],
                       facecolors=colr if i == 0 else "none", edgecolors=colr, linewidths=1.3, alpha=0.8,
                       label=f"{op.decode()}: {len(s):,} collectives at {len(cnt)} "
                             f"point{'s' if len(cnt) > 1 else ''}")
        if len(c):
            ax.set_xscale("log")
            ax.legend(fontsize=8)
    ax.set_xlabel("collective size (bytes, nccl-tests convention)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("Bus bandwidth of each collective against its size")
    ax.grid(alpha=0.3)
    add(fig, "busbw.png", "busbw vs size",
        "One marker per distinct (size, busbw) of collectives on more than one rank; larger markers: more "
        f"collectives at that point ({n_trivial} on single-rank communicators left out)." )

    # 3. FCT and slowdown CDFs, intra-host (NVLink) and inter-host (network) flows apart: the many
    # short NVLink flows of tensor parallelism would otherwise hide the network's flows in the tail.
    fl = d["flows"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    if fl is not None and len(fl):
        gph = gpus_per_host(meta)
        inter_m = (fl["src"] // gph) != (fl["dst"] // gph)
        for i, (what, sel) in enumerate((("inter-host (network)", inter_m), ("intra-host (NVLink)", ~inter_m))):
            if not sel.any():
                continue
            fct = np.sort(fl["fct_ps"][sel] / PS_PER_US)
            y = np.arange(1, len(fct) + 1) / len(fct)
            qs = ", ".join(f"p{q:g} {pct(fct, q):.3g}" for q in (50, 99, 99.9))
            ax.step(fct, y, where="post", color=f"C{i}", label=f"{what}: {len(fct):,} flows; {qs} us")
            ax.plot([pct(fct, q) for q in (50, 99, 99.9)], [0.5, 0.99, 0.999], "o", color=f"C{i}", ms=4)
            if "slowdown" in fl.dtype.names:
                sd = np.sort(fl["slowdown"][sel])
                ax2.step(sd, np.arange(1, len(sd) + 1) / len(sd), where="post", color=f"C{i}",
                         label=f"{what}: p50 {pct(sd, 50):.3g}x, p99 {pct(sd, 99):.3g}x")
        ax.set_xscale("log")
        ax.legend(fontsize=7.5, loc="upper left")
        if "slowdown" in fl.dtype.names:
            ax2.set_xscale("log")
            ax2.legend(fontsize=7.5, loc="center right")
    ax.set_xlabel("flow completion time (us, log scale)")
    ax.set_ylabel("CDF (fraction of flows)")
    ax.set_title(f"Flow completion times ({0 if fl is None else len(fl):,} flows)")
    ax.grid(alpha=0.3)
    ax2.set_xlabel("slowdown (FCT / ideal FCT on an idle fabric, log scale)")
    ax2.set_ylabel("CDF (fraction of flows)")
    ax2.set_title("Slowdown against an idle fabric")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    add(fig, "fct_cdf.png", "FCT CDF",
        "Left: CDFs of flow completion times, network and NVLink flows apart (dots: p50, p99, p99.9); right: "
        "CDFs of each flow's slowdown against its uncontended completion time.")

    # 4. Flow-start CDF per NIC (flows leaving the host through the source GPU's NIC).
    fig, ax = plt.subplots(figsize=(10, 4.5))
    how = "no inter-host flows"
    if fl is not None and len(fl):
        gph = gpus_per_host(meta)
        inter = fl[(fl["src"] // gph) != (fl["dst"] // gph)]
        srcs = sorted(set(inter["src"].tolist()))
        series = []
        for s in srcs:
            st = np.sort(inter["start_ps"][inter["src"] == s])
            series.append((s, st, np.arange(1, len(st) + 1) / len(st)))

        def draw(ax_, x, y, label, i):
            ax_.step(tax.map(x), y, where="post", lw=1.4, label=label)

        def bands(ax_, ser, groups):
            # Quantile function per NIC (time at which it started a fraction q of its flows), then
            # p50 / p90 / max across NICs at each q: the median, the slower tail and the slowest NIC.
            q = np.linspace(0, 1, 201)
            tq = np.stack([np.quantile(x, q) for _, x, _ in ser])
            for p, lab, lw in ((0, "fastest NIC (min)", 0.8), (50, "median NIC (p50)", 1.6), (90, "p90 NIC", 1.2),
                               (100, "slowest NIC (max)", 0.8)):
                ax_.plot(tax.map(np.percentile(tq, p, axis=0)), q, lw=lw, label=lab)
            ax_.fill_betweenx(q, tax.map(tq.min(axis=0)), tax.map(tq.max(axis=0)), color="0.8", alpha=0.5,
                              label=f"range over {len(ser)} NICs ({len(groups)} distinct)")

        if series:
            # Curves coincide as drawn when their quantile functions agree to 0.25% of the axis.
            qg = np.linspace(0, 1, 201)
            res = max((tax.length - tax.start) * 0.0025, 1.0)

            def key(x, _y):
                return np.round(tax.map(np.quantile(x, qg)) / res).astype(np.int64).tobytes()
            how = plot_grouped(ax, series, lambda n: f"NIC of rank {n}", "NICs", "ranks", draw, bands, key)
            how = f"{len(srcs)} NICs, " + ("drawn once per distinct curve" if how == "lines" else
                                           "percentiles across NICs")
            ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    tax.apply(ax)
    ax.set_ylabel("CDF (fraction of the NIC's flows)")
    ax.set_title(f"When each NIC starts its inter-host flows ({how})")
    ax.grid(alpha=0.3)
    add(fig, "flow_start_cdf.png", "Flow-start CDF per NIC",
        "For each NIC, the fraction of its inter-host flows started by each time; NICs with the same curve are "
        "drawn once; curves apart show skew between NICs or stragglers.")

    # 5. Queue occupancy over time: every switch port with a backlog, grouped or as bands.
    qu = d["queues"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    if qu is not None and len(qu) and (qu["max_queue_bytes"] > 0).any():
        nb = int(np.ceil(tax.segments[-1][1] / bw)) + 1
        qdiv, qunit = (1024.0 ** 2, "MiB") if qu["max_queue_bytes"].max() >= 1024 ** 2 else (1024.0, "KiB")
        ids = np.unique(qu["link_id"][qu["max_queue_bytes"] > 0])
        series, peaks, tiers_of = [], [], []
        for lid in ids:
            s = qu[qu["link_id"] == lid]
            dense = np.zeros(nb)
            dense[np.minimum(s["bin_start_ps"] // bw, nb - 1).astype(int)] = s["max_queue_bytes"] / qdiv
            name = f"{lid} ({s['tier'][0].decode()} {node_name(int(s['from_node'][0]), nranks)}->" \
                   f"{node_name(int(s['to_node'][0]), nranks)})"
            series.append((name, np.arange(nb) * bw, dense))
            peaks.append(dense.max())
            tiers_of.append(s["tier"][0].decode())
        xs = tax.map(np.arange(nb) * bw)

        def draw(ax_, x, y, label, i):
            ax_.step(xs, y, where="post", lw=1.1, label=label)

        def bands(ax_, ser, groups):
            # Per tier: the largest backlog of any of its ports and the mean over its ports, bin by
            # bin (a median port is idle in most bins: its percentile lines would sit at zero).
            for i, tier in enumerate(sorted(set(tiers_of))):
                m = np.stack([y for (_, _, y), t in zip(ser, tiers_of) if t == tier])
                ax_.step(xs, m.max(axis=0), where="post", lw=1.1, color=f"C{i}",
                         label=f"{tier} tier: max over its {len(m)} ports")
                ax_.step(xs, m.mean(axis=0), where="post", lw=1.0, ls="--", color=f"C{i}",
                         label=f"{tier} tier: mean over its {len(m)} ports")

        res = max(max(peaks) * 0.01, 1e-9)  # curves within 1% of the peak coincide as drawn

        def key(_x, y):
            return np.round(y / res).astype(np.int64).tobytes()
        how = plot_grouped(ax, series, lambda n: f"port {n}", "ports", "links", draw, bands, key)
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_title(f"Switch egress queues: {len(ids)} ports with a backlog "
                     f"({'one line per distinct curve' if how == 'lines' else 'max and mean per tier'}), "
                     f"peak {max(peaks):.3g} {qunit} at port {series[int(np.argmax(peaks))][0]}", fontsize=10)
    else:
        qunit = "KiB"
        ax.set_title("Switch egress queues: no backlog anywhere in this run")
    tax.apply(ax)
    ax.set_ylabel(f"largest backlog in a {bw / PS_PER_US:g} us bin ({qunit})")
    ax.grid(alpha=0.3)
    add(fig, "queues.png", "Queue occupancy over time",
        "Bytes queued ahead of an arriving packet at switch egress ports (the largest per bin); ports with the "
        "same curve drawn once; many ports as the max and mean over each tier's ports.")

    # 6. Link utilization heatmap per tier, on the shared time axis.
    tiers = [b"nvlink", b"nic", b"fabric"]
    if li is not None and len(li) and (li["tier"] == b"core").any():
        tiers.append(b"core")  # schema 3: 3-tier Clos / multi-pod
    shown = [t for t in tiers if busy is not None and (busy["tier"] == t).any()]
    idle_tiers = [t.decode() for t in tiers if t not in shown]
    width = tax.edges()
    ncols = int((tax.length - tax.start) // width) + 1
    fig, axes = plt.subplots(max(len(shown), 1), 1, figsize=(11, 1.2 + 2.6 * max(len(shown), 1)), squeeze=False,
                             layout="constrained")
    axes = axes[:, 0]
    im = None
    for ax, tier in zip(axes, shown):
        s = busy[busy["tier"] == tier]
        ids = np.unique(s["link_id"])
        row = np.searchsorted(ids, s["link_id"])
        col = np.minimum((tax.map(s["bin_start_ps"]) - tax.start) // width, ncols - 1).astype(int)
        m = np.zeros((len(ids), ncols))
        np.add.at(m, (row, col), s["utilization"] * (bw / width))
        im = ax.imshow(np.minimum(m, 1.0), aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=1,
                       extent=[tax.start, tax.start + ncols * width, len(ids), 0])
        ax.set_title(f"{tier.decode()} links: {len(ids)} directed links with traffic, mean utilization while "
                     f"shown {m.mean():.1%}", fontsize=10)
        ax.set_ylabel("link (row index)")
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        tax.apply(ax, xlabel=False)
    if not shown:
        axes[0].set_title("no link carried traffic in this run")
    axes[-1].set_xlabel(tax.label())
    if im is not None:
        fig.colorbar(im, ax=list(axes), fraction=0.03, label="utilization (fraction of the link rate)")
    add(fig, "link_util.png", "Link utilization heatmap per tier",
        "One row per directed link with traffic, colour = bytes x 8 / (rate x bin) per time column"
        + (f"; tiers without traffic: {', '.join(idle_tiers)}" if idle_tiers else "") + ".")

    # 7. PFC pause timeline (schema 3): paused fraction per bin, one row per link ever paused.
    if li is None or "pause_ps" not in li_names:
        notes.append((None, "PFC pause timeline", "this file has no PFC columns in /links (schema < 3)"))
    else:
        paused = li[li["pause_ps"] > 0]
        n_xoff = int(li["pfc_pauses"].sum())
        if not len(paused) and n_xoff == 0:
            notes.append((None, "PFC pause timeline", "no PFC pauses in this run"))
        else:
            fig, cap = pfc_timeline(plt, paused if len(paused) else li[li["pfc_pauses"] > 0], bw, tax, nranks,
                                    n_xoff)
            add(fig, "pfc.png", "PFC pause timeline", cap)

    # 8. ECN marks and drops per tier over time (schema 3), only when the run has any.
    if li is not None and "ecn_marks" in li_names and (li["ecn_marks"].sum() > 0 or li["drops"].sum() > 0):
        fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
        xs = tax.start + np.arange(ncols + 1) * width
        for ax, col, what in zip(axes, ("ecn_marks", "drops"), ("ECN marks", "drops")):
            s = li[li[col] > 0]
            if not len(s):
                ax.text(0.5, 0.5, f"no {what} in this run", transform=ax.transAxes, ha="center", va="center")
            for tier in sorted(set(s["tier"].tolist())):
                t = s[s["tier"] == tier]
                cnt = np.zeros(ncols + 1)
                np.add.at(cnt, np.minimum((tax.map(t["bin_start_ps"]) - tax.start) // width, ncols - 1).astype(int),
                          t[col])
                ax.step(xs, cnt, where="post", lw=1, label=f"{tier.decode()} tier ({int(t[col].sum())} in total)")
            ax.set_ylabel(f"{what} per {width / PS_PER_US:g} us (packets)")
            ax.set_title(f"{what} per tier over time ({int(li[col].sum())} in total)", fontsize=10)
            ax.grid(alpha=0.3)
            tax.apply(ax, xlabel=False)
            if len(s):
                ax.legend(fontsize=8)
        axes[-1].set_xlabel(tax.label())
        fig.tight_layout()
        add(fig, "ecn_drops.png", "ECN marks and drops per tier",
            "Packets CE-marked (RED at enqueue) and packets dropped at switch egress ports, summed per tier and "
            "time column.")
    elif li is not None and "ecn_marks" in li_names:
        notes.append((None, "ECN marks and drops per tier", "no ECN marks and no drops in this run"))

    # 9. Several jobs (schema 5, `jobs:` specs): per-job iteration time, and the links they share.
    jobs = d.get("jobs")
    if jobs is not None and len(jobs):
        out.append(jobs_figure(plt, d, add_caption=caption))
        lt = d.get("link_totals")
        shared = lt[lt["jobs"] > 1] if lt is not None and len(lt) else None
        if shared is None or not len(shared):
            notes.append((None, "Shared links", "no switch link carried data of more than one job"))
        elif li is not None and len(li):
            out.append(shared_links_figure(plt, d, shared, tax, bw, add_caption=caption))
    return out, notes


def job_names(d):
    return {int(j["job"]): j["name"].decode().rstrip("\0") for j in d["jobs"]}


def jobs_figure(plt, d, add_caption):
    """jobs.png: each job's iteration time together (and alone, from run --isolated, when known),
    with its slowdown."""
    jobs = d["jobs"]
    names = job_names(d)
    it = jobs["iteration_time_ps"].astype(float)
    alone = jobs["alone_iteration_time_ps"].astype(float)
    div, unit = time_unit(float(max(it.max(), alone.max(), 1)))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    x = np.arange(len(jobs))
    has_alone = bool((alone > 0).any())
    wdt = 0.38 if has_alone else 0.6
    ax.bar(x - (wdt / 2 if has_alone else 0), it / div, wdt, color="#c44e52", label="together (this run)")
    if has_alone:
        ax.bar(x + wdt / 2, np.where(alone > 0, alone, 0) / div, wdt, color="#4c72b0", label="alone (run --isolated)")
    for i, j in enumerate(jobs):
        txt = f"{it[i] / div:.3f} {unit}"
        if j["slowdown"] > 0:
            txt += f"\nslowdown {j['slowdown']:.3f}x"
        ax.annotate(txt, (x[i] - (wdt / 2 if has_alone else 0), it[i] / div), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{names[int(j['job'])]} ({int(j['gpus'])} GPUs)" for j in jobs])
    ax.set_ylabel(f"iteration time ({unit})")
    ax.set_ylim(0, max(it.max(), alone.max()) / div * 1.3)
    ax.set_title("Iteration time per job", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    cap = ("Per job: (last rank's finish - start) / iterations in this run"
           + (", and the same job alone on the same placement (run --isolated); the label gives together / alone."
              if has_alone else "; run with --isolated for the alone baseline and the slowdown."))
    add_caption(fig, cap)
    return ("jobs.png", fig, "Iteration time per job", cap)


def shared_links_figure(plt, d, shared, tax, bw, add_caption, max_links=8):
    """shared_links.png: utilization over time of the switch links that carried data of more than
    one job (the busiest `max_links` as lines, the mean over all of them in black), with each
    link's run totals (ECN marks, PFC pauses) in the legend."""
    li = d["links"]
    names = job_names(d)
    nranks = int(d["meta"].get("ranks", 0))
    order = np.argsort(-shared["bytes"].astype(float), kind="stable")
    top = shared[order[:max_links]]
    width = tax.edges()
    ncols = int((tax.length - tax.start) // width) + 1
    xs = tax.start + np.arange(ncols) * width
    fig, ax = plt.subplots(figsize=(11, 4.6))
    mean = np.zeros(ncols)
    ids = set(int(v) for v in shared["link_id"])
    sel = li[np.isin(li["link_id"], list(ids))]
    col = np.minimum((tax.map(sel["bin_start_ps"]) - tax.start) // width, ncols - 1).astype(int)
    np.add.at(mean, col, sel["utilization"] * (bw / width))
    mean /= max(len(ids), 1)
    for t in top:
        s = li[li["link_id"] == t["link_id"]]
        u = np.zeros(ncols)
        np.add.at(u, np.minimum((tax.map(s["bin_start_ps"]) - tax.start) // width, ncols - 1).astype(int),
                  s["utilization"] * (bw / width))
        jl = "+".join(names[j] for j in sorted(names) if int(t["job_mask"]) >> j & 1)
        ax.step(xs, np.minimum(u, 1.0), where="post", lw=0.8, alpha=0.8,
                label=f"{node_name(int(t['from_node']), nranks)}->{node_name(int(t['to_node']), nranks)} ({jl}): "
                      f"{int(t['ecn_marks'])} ECN, {int(t['pfc_pauses'])} PFC")
    ax.step(xs, np.minimum(mean, 1.0), where="post", lw=2, color="black", label=f"mean of the {len(ids)} shared links")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("utilization (fraction of the link rate)")
    # XOFF frames sent by the switches the shared links leave (to NICs and switches alike).
    lt = d["link_totals"]
    at = np.isin(lt["from_node"], np.unique(shared["from_node"]))
    sent = int(lt["pfc_sent"][at].sum()) if "pfc_sent" in lt.dtype.names else 0
    ax.set_title(f"{len(ids)} switch links carried data of more than one job: {int(shared['ecn_marks'].sum())} ECN marks "
                 f"and {int(shared['pfc_pauses'].sum())} PFC pauses on them; their switches sent {sent} XOFF frames",
                 fontsize=10)
    tax.apply(ax, xlabel=False)
    ax.set_xlabel(tax.label())
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    fig.tight_layout()
    cap = ("Utilization of the switch links that carried data of more than one job (/link_totals jobs > 1): the "
           + str(len(top)) + " with the most bytes, and their mean (black); legend: jobs, ECN marks, PFC pauses.")
    add_caption(fig, cap)
    return ("shared_links.png", fig, "Shared-link utilization", cap)


def report(args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("python", "matplotlib is not importable by " + sys.executable,
             "install Debian's python3-matplotlib (scripts/setup.sh)")
    d = load(args.h5)
    out = args.output or (os.path.splitext(args.h5)[0] + "_report")
    created_dir = not os.path.isdir(out)
    written = []  # files of this report so far: removed again if a later one cannot be written

    def fail_clean(where, problem, fix):
        # No partial report: drop what this run wrote (and the directory if it made it).
        for f in written:
            try:
                os.remove(f)
            except OSError:
                pass
        if created_dir:
            try:
                os.rmdir(out)
            except OSError:
                pass
        fail(where, problem, fix)

    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        fail(out, f"cannot create the output directory ({e.strerror})", "choose a writable directory with -o")
    if not os.access(out, os.W_OK | os.X_OK):
        fail(out, "the output directory is not writable", "choose a writable directory with -o")
    meta = d["meta"]
    iter_ps = int(meta.get("simulated_time_ps", 0))
    figs, notes = figures(d)
    pngs = []  # (file, title, caption)
    for name, fig, title, cap in figs:
        p = os.path.join(out, name)
        written.append(p)
        try:
            fig.savefig(p, dpi=110, bbox_inches="tight")
        except OSError as e:
            fail_clean(p, f"cannot write ({e.strerror})",
                       "check free space and permissions of the output directory; nothing was left")
        plt.close(fig)
        pngs.append((name, title, cap))

    # HTML page.
    rows = [("iteration time", f"{fmt_ps(iter_ps)} ({iter_ps} ps)"), ("ranks", meta.get("ranks")),
            ("events", meta.get("events")), ("processes", meta.get("processes")),
            ("workload", meta.get("workload")), ("version", f"{meta.get('version')} ({meta.get('git_commit')})"),
            ("schema", meta.get("schema_version"))]
    fc = fabric_counters(meta)
    for k, v in fc.items():
        unit = str(meta.get("units.fabric_" + k, "1"))
        if unit == "ps":
            rows.append((f"fabric {k}", f"{v / PS_PER_US:.3f} us ({v} ps)"))
        else:
            rows.append((f"fabric {k}", f"{v}" + ("" if unit == "1" else f" {unit}")))
    if not fc:
        rows.append(("fabric counters", "none (not a packet-level run, or schema < 3)"))
    page = ["<!doctype html><html><head><meta charset='utf-8'><title>fabricsim report</title>",
            "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}td{padding:2px 8px}"
            "img{max-width:100%;border:1px solid #ddd}</style></head><body>",
            f"<h1>fabricsim report: {html.escape(os.path.basename(args.h5))}</h1><table>"]
    page += [f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in rows]
    page.append("</table>")
    for name, title, cap in pngs + notes:
        page.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(cap)}</p>")
        if name:
            page.append(f"<img src='{name}' alt='{html.escape(title)}'>")
    page.append("</body></html>")
    p = os.path.join(out, "index.html")
    written.append(p)
    try:
        with open(p, "w") as fh:
            fh.write("\n".join(page) + "\n")
    except OSError as e:
        fail_clean(p, f"cannot write ({e.strerror})",
                   "check free space and permissions of the output directory; nothing was left")
    print(os.path.abspath(p))
    for name, _, _ in pngs:
        print(os.path.abspath(os.path.join(out, name)))
    return 0


def pfc_timeline(plt, rows, bw, tax, nranks, n_xoff, max_links=64):
    """pfc.png: raster of the paused fraction (pause_ps / column width) on the report's time axis
    `tax`, one row per link whose transmitter was paused (the `max_links` with the most paused
    time), labelled from->to tier. Returns (Figure, caption)."""
    ids, inv = np.unique(rows["link_id"], return_inverse=True)
    total = np.zeros(len(ids))
    np.add.at(total, inv, rows["pause_ps"])
    order = np.argsort(-total, kind="stable")[:max_links]
    keep = np.sort(ids[order])
    rows = rows[np.isin(rows["link_id"], keep)]
    width = tax.edges()
    ncols = int((tax.length - tax.start) // width) + 1
    r = np.searchsorted(keep, rows["link_id"])
    c = np.minimum((tax.map(rows["bin_start_ps"]) - tax.start) // width, ncols - 1).astype(int)
    m = np.zeros((len(keep), ncols))
    np.add.at(m, (r, c), rows["pause_ps"] / float(width))
    labels = []
    for lid in keep:
        s = rows[rows["link_id"] == lid][0]
        labels.append(f"{node_name(int(s['from_node']), nranks)}->{node_name(int(s['to_node']), nranks)} "
                      f"{s['tier'].decode()}")
    fig, ax = plt.subplots(figsize=(11, 1.8 + 0.22 * len(keep)))
    im = ax.imshow(np.minimum(m, 1.0), aspect="auto", interpolation="nearest", cmap="Reds", vmin=0, vmax=1,
                   extent=[tax.start, tax.start + ncols * width, len(keep), 0])
    ax.set_yticks(np.arange(len(keep)) + 0.5)
    ax.set_yticklabels(labels, fontsize=7 if len(keep) <= 32 else 5)
    ax.set_ylabel("paused transmitter (from->to tier)")
    more = f", {len(ids) - len(keep)} more not shown" if len(ids) > len(keep) else ""
    ax.set_title(f"PFC pauses: paused fraction per {width / PS_PER_US:g} us column "
                 f"({len(ids)} paused transmitters{more}; {n_xoff} XOFF received)", fontsize=10)
    tax.apply(ax)
    fig.colorbar(im, ax=ax, fraction=0.03, label="paused fraction of the column (0-1)")
    return fig, ("Rows: directed links whose transmitter PFC paused (gpuN = rank N, swN = switch LP N); "
                 "colour: the share of each time column it was paused.")


# ------------------------------------------------------------------------------------------------
# compare

def metrics(d):
    """Ordered (name, value, unit) of the key metrics of one run."""
    m = []
    r = d["ranks"]
    m.append(("iteration time", d["meta"].get("simulated_time_ps", 0) / PS_PER_US, "us"))
    for col, name in (("compute_ps", "compute (mean/rank)"), ("comm_ps", "communication (mean/rank)"),
                      ("exposed_comm_ps", "exposed comm (mean/rank)")):
        m.append((name, float(np.mean(r[col])) / PS_PER_US if len(r) else float("nan"), "us"))
    c = d["collectives"]
    if c is not None and len(c):
        c = c[c["ranks"] > 1]
        # Per (op, communicator size, bytes): sizes and communicators differ too much to average.
        for op, n, size in sorted(set(zip(c["op"].tolist(), c["ranks"].tolist(), c["bytes"].tolist()))):
            s = c[(c["op"] == op) & (c["ranks"] == n) & (c["bytes"] == size)]
            m.append((f"busbw {op.decode()} n={n} {size}B", float(np.mean(s["busbw_GBps"])), "GB/s"))
    fl = d["flows"]
    if fl is not None and len(fl):
        fct = fl["fct_ps"] / PS_PER_US
        m += [("flows", float(len(fl)), "1"), ("FCT p50", pct(fct, 50), "us"), ("FCT p99", pct(fct, 99), "us")]
        if "slowdown" in fl.dtype.names:
            m.append(("slowdown p99", pct(fl["slowdown"], 99), "1"))
    fc = fabric_counters(d["meta"])
    if fc:
        for key, name in FABRIC_COMPARED:
            if key == "paused_ps":
                if "switch_paused_ps" in fc and "nic_paused_ps" in fc:
                    m.append((name, (fc["switch_paused_ps"] + fc["nic_paused_ps"]) / PS_PER_US, "us"))
            elif key in fc:
                ps = key.endswith("_ps")
                m.append((name, fc[key] / PS_PER_US if ps else float(fc[key]), "us" if ps else "1"))
    return m


# Fabric counters shown by compare (when a file has /meta fabric_*): (counter, metric name).
FABRIC_COMPARED = [("pause_frames", "fabric PFC pause frames"), ("paused_ps", "fabric paused time (sw+NIC)"),
                   ("switch_paused_ps", "fabric paused time switches"), ("nic_paused_ps", "fabric paused time NICs"),
                   ("ecn_marks", "fabric ECN marks"), ("cnps", "fabric CNPs"), ("drops", "fabric drops"),
                   ("retransmits", "fabric retransmits"), ("timeouts", "fabric timeouts")]


def compare(args):
    a, b = load(args.a), load(args.b)
    ma, mb = metrics(a), metrics(b)
    db = {k: (v, u) for k, v, u in mb}
    # Fabric counters only when both files have them (a coarse-rung or schema-2 file has none).
    both = bool(fabric_counters(a["meta"])) and bool(fabric_counters(b["meta"]))
    fab = {name for _, name in FABRIC_COMPARED}
    if not both:
        ma = [x for x in ma if x[0] not in fab]
        mb = [x for x in mb if x[0] not in fab]
    names = [k for k, _, _ in ma] + [k for k, _, _ in mb if k not in {x for x, _, _ in ma}]
    da = {k: (v, u) for k, v, u in ma}
    print(f"A: {args.a}\nB: {args.b}")
    print(f"{'metric':<34} {'unit':>5} {'A':>14} {'B':>14} {'B/A-1':>9}")
    for k in names:
        va, u = da.get(k, (float("nan"), db.get(k, (0, ""))[1]))
        vb, _ = db.get(k, (float("nan"), u))
        rel = 0.0 if va == vb else (vb / va - 1) * 100 if va != 0 and va == va and vb == vb else float("nan")
        rs = f"{rel:+8.2f}%" if rel == rel else "      n/a"
        print(f"{k:<34} {u:>5} {va:>14.4f} {vb:>14.4f} {rs}")
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="fabricsim_results.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("report", help="PNG plots + index.html")
    rp.add_argument("h5")
    rp.add_argument("-o", "--output", help="output directory (default: RUN_report next to RUN.h5)")
    cp = sub.add_parser("compare", help="key metrics of two runs side by side")
    cp.add_argument("a")
    cp.add_argument("b")
    args = p.parse_args(argv)
    return report(args) if args.cmd == "report" else compare(args)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BrokenPipeError:
        # The reader of our stdout went away (`fabricsim report RUN.h5 | head -1`): the files are
        # written; stop quietly as other command-line tools do.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        sys.exit(0)
    except Exception as e:  # internal error: one line, exit 3
        print(f"fabricsim: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(3)
