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
            for name in ("ranks", "collectives", "flows", "links", "queues"):
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
    pngs = []  # (file, title, caption)
    notes = []  # (None, title, text): sections without a plot

    def save(fig, name, title, caption):
        p = os.path.join(out, name)
        written.append(p)
        try:
            fig.savefig(p, dpi=110, bbox_inches="tight")
        except OSError as e:
            fail_clean(p, f"cannot write ({e.strerror})",
                       "check free space and permissions of the output directory; nothing was left")
        plt.close(fig)
        pngs.append((name, title, caption))

    # 1. Iteration breakdown per rank.
    r = d["ranks"]
    fig, ax = plt.subplots(figsize=(11, 4))
    if len(r):
        x = r["rank"]
        comp = r["compute_ps"] / PS_PER_US
        exp = r["exposed_comm_ps"] / PS_PER_US
        idle = np.maximum(iter_ps / PS_PER_US - comp - exp, 0)
        ax.bar(x, comp, width=1.0, label="compute", color="#4c72b0")
        ax.bar(x, exp, width=1.0, bottom=comp, label="exposed communication", color="#dd8452")
        ax.bar(x, idle, width=1.0, bottom=comp + exp, label="idle (until iteration end)", color="#cccccc")
        ax.plot(x, r["comm_ps"] / PS_PER_US, "k.", ms=3, label="communication (incl. overlapped)")
    ax.set_xlabel("rank")
    ax.set_ylabel("time (us)")
    ax.set_title(f"Iteration breakdown per rank (iteration {iter_ps / PS_PER_US:.1f} us)")
    ax.legend(fontsize=8, loc="lower right")
    save(fig, "breakdown.png", "Iteration breakdown per rank",
         "compute + exposed communication + idle = iteration time; dots: all communication time")

    # 2. busbw vs size.
    c = d["collectives"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if c is not None and len(c):
        c = c[c["ranks"] > 1]
        for op in sorted(set(c["op"])):
            s = c[c["op"] == op]
            ax.scatter(s["bytes"], s["busbw_GBps"], s=14, alpha=0.6, label=op.decode())
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    ax.set_xlabel("collective size (bytes, nccl-tests convention)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title("Per-collective bus bandwidth vs size")
    ax.grid(alpha=0.3)
    save(fig, "busbw.png", "busbw vs size", "one dot per collective (communicators of more than one rank)")

    # 3. FCT CDF with p50/p99/p99.9 and slowdown CDF.
    fl = d["flows"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    if fl is not None and len(fl):
        fct = np.sort(fl["fct_ps"] / PS_PER_US)
        y = np.arange(1, len(fct) + 1) / len(fct)
        ax.step(fct, y, where="post")
        for q, col in ((50, "g"), (99, "orange"), (99.9, "r")):
            v = pct(fct, q)
            ax.axvline(v, color=col, ls="--", lw=1)
            ax.text(v, 0.05 + 0.1 * (q > 60) + 0.1 * (q > 99), f" p{q:g} {v:.2f} us", color=col, fontsize=8)
        ax.set_xscale("log")
        if "slowdown" in fl.dtype.names:
            sd = np.sort(fl["slowdown"])
            ax2.step(sd, np.arange(1, len(sd) + 1) / len(sd), where="post", color="purple")
            ax2.set_xscale("log")
            ax2.axvline(pct(sd, 99), color="r", ls="--", lw=1)
            ax2.text(pct(sd, 99), 0.1, f" p99 {pct(sd, 99):.2f}", color="r", fontsize=8)
    ax.set_xlabel("flow completion time (us)")
    ax.set_ylabel("CDF")
    ax.set_title(f"FCT CDF ({0 if fl is None else len(fl)} flows)")
    ax.grid(alpha=0.3)
    ax2.set_xlabel("slowdown = FCT / ideal")
    ax2.set_title("Slowdown CDF")
    ax2.grid(alpha=0.3)
    save(fig, "fct_cdf.png", "FCT CDF", "flow completion times with p50/p99/p99.9; slowdown vs the ideal FCT")

    # 4. Flow-start CDF per NIC (flows leaving the host through the source GPU's NIC).
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if fl is not None and len(fl):
        gph = gpus_per_host(meta)
        inter = fl[(fl["src"] // gph) != (fl["dst"] // gph)]
        srcs = sorted(set(inter["src"].tolist()))
        shown = srcs[:: max(1, len(srcs) // 16)]
        for s in srcs:
            st = np.sort(inter["start_ps"][inter["src"] == s] / PS_PER_US)
            hl = s in shown
            ax.step(st, np.arange(1, len(st) + 1) / len(st), where="post", lw=1.2 if hl else 0.5,
                    alpha=0.9 if hl else 0.25, color=None if hl else "gray", label=f"NIC of rank {s}" if hl else None)
        if shown:
            ax.legend(fontsize=6, ncol=2)
        ax.set_title(f"Flow-start CDF per NIC ({len(srcs)} NICs with inter-host flows, {len(shown)} coloured)")
    ax.set_xlabel("flow start (us)")
    ax.set_ylabel("CDF of the NIC's flows")
    ax.grid(alpha=0.3)
    save(fig, "flow_start_cdf.png", "Flow-start CDF per NIC",
         "when each NIC starts its inter-host flows; spread between NICs shows skew / stragglers")

    # 5. Queue occupancy over time.
    qu = d["queues"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bw = int(d["meta"].get("sample_interval_ps", 0)) or 1
    if qu is not None and len(qu):
        ids, inv = np.unique(qu["link_id"], return_inverse=True)
        peak = np.zeros(len(ids))
        np.maximum.at(peak, inv, qu["max_queue_bytes"])
        top = ids[np.argsort(-peak)[:8]]
        for lid in top:
            s = qu[qu["link_id"] == lid]
            if s["max_queue_bytes"].max() == 0:
                continue
            ax.step(s["bin_start_ps"] / PS_PER_US, s["max_queue_bytes"] / 1024, where="post", lw=1,
                    label=f"link {lid} ({s['tier'][0].decode()} {s['from_node'][0]}->{s['to_node'][0]})")
        ax.legend(fontsize=7)
        ax.set_title(f"Switch egress queue occupancy: 8 ports with the largest peak (bin {bw / PS_PER_US:g} us)")
    else:
        ax.set_title("Switch egress queue occupancy (no /queues rows)")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("max backlog in bin (KiB)")
    ax.grid(alpha=0.3)
    save(fig, "queues.png", "Queue occupancy over time", "max bytes ahead of an arriving packet per bin")

    # 6. Link utilization heatmap per tier.
    li = d["links"]
    tiers = [b"nvlink", b"nic", b"fabric"]
    if li is not None and len(li) and (li["tier"] == b"core").any():
        tiers.append(b"core")  # schema 3: 3-tier Clos / multi-pod
    fig, axes = plt.subplots(len(tiers), 1, figsize=(11, 10 * len(tiers) / 3))
    last_bin = max(iter_ps, 1)
    nb_full = last_bin // bw + 1
    group = max(1, int(np.ceil(nb_full / 400)))  # at most 400 columns
    ncols = int(nb_full // group + 1)
    for ax, tier in zip(axes, tiers):
        # Rows with bytes (schema 3 also has rows for pauses, marks or drops only).
        s = li[(li["tier"] == tier) & (li["bytes"] > 0)] if li is not None and len(li) else None
        if s is None or not len(s):
            ax.set_title(f"{tier.decode()}: no traffic")
            ax.axis("off")
            continue
        ids = np.unique(s["link_id"])
        row = np.searchsorted(ids, s["link_id"])
        col = np.minimum((s["bin_start_ps"] // bw) // group, ncols - 1).astype(int)
        m = np.zeros((len(ids), ncols))
        np.add.at(m, (row, col), s["utilization"] / group)
        im = ax.imshow(m, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=1,
                       extent=[0, ncols * group * bw / PS_PER_US, len(ids), 0])
        ax.set_title(f"{tier.decode()} links: utilization per {group * bw / PS_PER_US:g} us bin "
                     f"({len(ids)} directed links with traffic)")
        ax.set_ylabel("link (by id)")
        fig.colorbar(im, ax=ax, fraction=0.03)
    axes[-1].set_xlabel("time (us)")
    fig.tight_layout()
    save(fig, "link_util.png", "Link utilization heatmap per tier",
         "rows: directed links with traffic; colour: bytes*8 / (rate*bin)")

    # 7. PFC pause timeline (schema 3): paused fraction per bin, one row per link ever paused.
    li_names = li.dtype.names if li is not None else ()
    nranks = int(meta.get("ranks", 0))
    if li is None or "pause_ps" not in li_names:
        notes.append((None, "PFC pause timeline", "this file has no PFC columns in /links (schema < 3)"))
    else:
        paused = li[li["pause_ps"] > 0]
        n_xoff = int(li["pfc_pauses"].sum())
        if not len(paused) and n_xoff == 0:
            notes.append((None, "PFC pause timeline", "no PFC pauses in this run"))
        else:
            pfc_timeline(plt, save, paused if len(paused) else li[li["pfc_pauses"] > 0], bw, iter_ps, nranks,
                         n_xoff)

    # 8. ECN marks and drops per tier over time (schema 3), only when the run has any.
    if li is not None and "ecn_marks" in li_names and (li["ecn_marks"].sum() > 0 or li["drops"].sum() > 0):
        fig, axes = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
        width = group * bw
        for ax, col, what in zip(axes, ("ecn_marks", "drops"), ("ECN marks", "drops")):
            s = li[li[col] > 0]
            for tier in sorted(set(s["tier"].tolist())):
                t = s[s["tier"] == tier]
                # Dense per-bin counts (bins without a row count 0), same columns as link_util.png.
                cnt = np.zeros(ncols + 1)
                np.add.at(cnt, np.minimum(t["bin_start_ps"] // width, ncols - 1).astype(int), t[col])
                ax.step(np.arange(ncols + 1) * width / PS_PER_US, cnt, where="post", lw=1,
                        label=f"{tier.decode()} ({int(t[col].sum())} total)")
            ax.set_ylabel(f"{what} per {width / PS_PER_US:g} us")
            ax.set_title(f"{what} per tier over time ({int(li[col].sum())} in total)")
            ax.grid(alpha=0.3)
            ax.set_xlim(0, ncols * width / PS_PER_US)
            if len(s):
                ax.legend(fontsize=8)
        axes[-1].set_xlabel("time (us)")
        fig.tight_layout()
        save(fig, "ecn_drops.png", "ECN marks and drops per tier",
             "packets CE-marked (RED at enqueue) and packets dropped at switch egress ports, summed per tier and bin")
    elif li is not None and "ecn_marks" in li_names:
        notes.append((None, "ECN marks and drops per tier", "no ECN marks and no drops in this run"))

    # HTML page.
    rows = [("iteration time", f"{iter_ps / PS_PER_US:.3f} us"), ("ranks", meta.get("ranks")),
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


def pfc_timeline(plt, save, rows, bw, iter_ps, nranks, n_xoff, max_links=64):
    """pfc.png: raster of the paused fraction (pause_ps / bin) per bin, one row per link whose
    transmitter was paused (the `max_links` with the most paused time), labelled from->to tier."""
    ids, inv = np.unique(rows["link_id"], return_inverse=True)
    total = np.zeros(len(ids))
    np.add.at(total, inv, rows["pause_ps"])
    order = np.argsort(-total, kind="stable")[:max_links]
    keep = np.sort(ids[order])
    rows = rows[np.isin(rows["link_id"], keep)]
    last = max(iter_ps, int(rows["bin_start_ps"].max()) + bw, 1)
    nb = last // bw + 1
    group = max(1, int(np.ceil(nb / 400)))  # at most 400 columns
    ncols = int(nb // group + 1)
    r = np.searchsorted(keep, rows["link_id"])
    c = np.minimum((rows["bin_start_ps"] // bw) // group, ncols - 1).astype(int)
    m = np.zeros((len(keep), ncols))
    np.add.at(m, (r, c), rows["pause_ps"] / float(group * bw))
    labels = []
    for lid in keep:
        s = rows[rows["link_id"] == lid][0]
        labels.append(f"{node_name(int(s['from_node']), nranks)}->{node_name(int(s['to_node']), nranks)} "
                      f"{s['tier'].decode()}")
    fig, ax = plt.subplots(figsize=(11, 1.5 + 0.22 * len(keep)))
    im = ax.imshow(np.minimum(m, 1.0), aspect="auto", interpolation="nearest", cmap="Reds", vmin=0, vmax=1,
                   extent=[0, ncols * group * bw / PS_PER_US, len(keep), 0])
    ax.set_yticks(np.arange(len(keep)) + 0.5)
    ax.set_yticklabels(labels, fontsize=7 if len(keep) <= 32 else 5)
    more = f", {len(ids) - len(keep)} more not shown" if len(ids) > len(keep) else ""
    ax.set_title(f"PFC pause timeline: paused fraction per {group * bw / PS_PER_US:g} us bin "
                 f"({len(ids)} paused transmitters{more}; {n_xoff} XOFF received)")
    ax.set_xlabel("time (us)")
    fig.colorbar(im, ax=ax, fraction=0.03, label="paused fraction of the bin")
    save(fig, "pfc.png", "PFC pause timeline",
         "rows: directed links whose transmitter PFC paused (from->to tier, gpuN = rank N, swN = switch LP N); "
         "colour: pause_ps / bin width")


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
