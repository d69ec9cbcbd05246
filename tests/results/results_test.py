#!/usr/bin/python3
"""Checks fabricsim's results outputs with h5py and the json module only (not fabricsim code).

usage: results_test.py FABRICSIM SOURCE_DIR MPIEXEC

1. every dataset, column (name, order, HDF5 class), unit attribute and /meta attribute documented
   in docs/hdf5_schema.md (schema 4) exists, /meta attributes with their units.* attribute, the
   packet run's fabric_<counter> attributes (uint64, units ps / bytes / 1);
2. conservation: ring-planned collectives move exactly their closed-form bytes as flows
   (AllReduce 2(N-1)S, AllGather/ReduceScatter (N-1)S for S divisible by N), and the bytes of the
   GPU-side /links rows equal the flow bytes (NIC tier: inter-host flows);
3. the same run on 1 and 2 MPI processes writes identical datasets;
4. the trace-event JSON is valid, every event has ph/ts/dur/pid/tid, and per rank the compute
   durations sum to /ranks.compute_ps and the union of comm events is /ranks.comm_ps;
5. `fabricsim report` writes every PNG + index.html (skipped, with the reason, without matplotlib);
   `fabricsim compare` shows 0% differences for identical runs; a damaged (bytes overwritten,
   truncated) file is one line naming it, exit 2, for report and compare;
6. read-only output directory -> exit 2 for run and report; SIGTERM half way -> no output file;
7. a packet run that provokes PFC (incast into an oversubscribed leaf, small buffer): the /links
   PFC/ECN/drop columns sum to the /meta fabric totals (pfc_pauses = pause_frames, pause_ps =
   switch + NIC paused time, ecn_marks, drops), `report` draws pfc.png, `compare` shows the
   fabric counters.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

FAB, SRC, MPIEXEC = sys.argv[1], sys.argv[2], sys.argv[3]
WORKLOAD = os.path.join(SRC, "tests/data/synthetic/hybrid_tp8_dp4.txt")
SETS = ["--set", "cluster.nics_per_leaf=2", "--set", "cluster.spines=2", "--set", "simccl.planner=ring",
        "--set", "output.sample_interval=5us"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, np_=1, **kw):
    cmd = ([MPIEXEC, "-n", str(np_)] if np_ > 1 else []) + [FAB] + args
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# Documented schema 5: dataset -> [(column, numpy kind, unit)]
SCHEMA = {
    "ranks": [("rank", "u", "1"), ("finish_ps", "i", "ps"), ("compute_ps", "i", "ps"), ("comm_ps", "i", "ps"),
              ("exposed_comm_ps", "i", "ps"), ("exposed_tp_ps", "i", "ps"), ("exposed_dp_ps", "i", "ps"),
              ("exposed_ep_ps", "i", "ps"), ("exposed_pp_ps", "i", "ps"), ("exposed_cp_ps", "i", "ps"),
              ("exposed_other_ps", "i", "ps"), ("pp_wait_ps", "i", "ps"), ("bubble_ps", "i", "ps"), ("job", "i", "1")],
    "collectives": [("group", "u", "1"), ("instance", "u", "1"), ("op", "S", "text"), ("bytes", "u", "bytes"),
                    ("ranks", "u", "1"), ("start_ps", "i", "ps"), ("end_ps", "i", "ps"), ("algbw_GBps", "f", "GB/s"),
                    ("busbw_GBps", "f", "GB/s"), ("algorithm", "S", "text"), ("protocol", "S", "text"),
                    ("channels", "u", "1"), ("job", "i", "1")],
    "flows": [("flow_id", "u", "1"), ("src", "u", "1"), ("dst", "u", "1"), ("bytes", "u", "bytes"),
              ("start_ps", "i", "ps"), ("end_ps", "i", "ps"), ("fct_ps", "i", "ps"), ("first_byte_ps", "i", "ps"),
              ("ideal_ps", "i", "ps"), ("slowdown", "f", "1"), ("first_spine", "i", "1"), ("group", "u", "1"),
              ("instance", "u", "1"), ("job", "i", "1")],
    "links": [("link_id", "u", "1"), ("from_node", "u", "1"), ("to_node", "u", "1"), ("tier", "S", "text"),
              ("bin_start_ps", "i", "ps"), ("bytes", "u", "bytes"), ("utilization", "f", "1"),
              ("pause_ps", "i", "ps"), ("pfc_pauses", "u", "1"), ("ecn_marks", "u", "1"), ("drops", "u", "1")],
    "queues": [("link_id", "u", "1"), ("from_node", "u", "1"), ("to_node", "u", "1"), ("tier", "S", "text"),
               ("bin_start_ps", "i", "ps"), ("max_queue_bytes", "u", "bytes")],
    "link_totals": [("link_id", "u", "1"), ("from_node", "u", "1"), ("to_node", "u", "1"), ("tier", "S", "text"),
                    ("bytes", "u", "bytes"), ("utilization", "f", "1"), ("pause_ps", "i", "ps"),
                    ("pfc_pauses", "u", "1"), ("ecn_marks", "u", "1"), ("drops", "u", "1"),
                    ("link_retransmits", "u", "1"), ("pfc_sent", "u", "1"), ("jobs", "u", "1"),
                    ("job_mask", "u", "1")],
    "jobs": [("job", "u", "1"), ("name", "S", "text"), ("gpus", "u", "1"), ("start_ps", "i", "ps"),
             ("iterations", "u", "1"), ("finish_ps", "i", "ps"), ("iteration_time_ps", "i", "ps"),
             ("alone_iteration_time_ps", "i", "ps"), ("slowdown", "f", "1"), ("compute_ps", "f", "ps"),
             ("comm_ps", "f", "ps"), ("exposed_comm_ps", "f", "ps")],
    "faults": [("index", "u", "1"), ("kind", "S", "text"), ("node_a", "u", "1"), ("node_b", "u", "1"),
               ("time_ps", "i", "ps"), ("until_ps", "i", "ps"), ("reconverge_ps", "i", "ps"), ("ber", "f", "1"),
               ("rate_bps", "u", "bit/s")],
}
SORTED_BY = {"ranks": "rank", "collectives": "group,instance", "flows": "flow_id",
             "links": "link_id,bin_start_ps", "queues": "link_id,bin_start_ps", "link_totals": "link_id", "jobs": "job",
             "faults": "index"}
META = {"schema_version": "i", "spec_text": "S", "version": "S", "git_commit": "S", "workload": "S", "seed": "u",
        "processes": "u", "threads": "u", "ranks": "u", "wall_s": "f", "events": "u", "simulated_time_ps": "i",
        "sample_interval_ps": "i"}
META_UNITS = {"schema_version": "1", "spec_text": "text", "version": "text", "git_commit": "text", "workload": "text",
              "seed": "1", "processes": "1", "threads": "1", "ranks": "1", "wall_s": "s", "events": "1",
              "simulated_time_ps": "ps", "sample_interval_ps": "ps"}
# Documented /meta attributes of runs with a memory estimate (generated workloads; schema 4).
MEMORY = {"fits_memory": ("u", "1"), "memory_estimate_bytes": ("u", "bytes"), "memory_capacity_bytes": ("u", "bytes")}
# Documented /meta fabric counters of packet-level runs (fabric_<name>, uint64).
FABRIC = ["switch_packets", "nic_data_packets", "pause_frames", "resume_frames", "switch_paused_ps", "nic_paused_ps",
          "nic_pauses", "ecn_marks", "drops", "headroom_drops", "retransmits", "timeouts", "nacks", "cnps", "acks",
          "max_buffer_bytes", "nvls_absorbed", "nvls_copies", "down_drops", "ber_drops", "retransmit_bytes",
          "link_retransmits", "link_retransmit_bytes"]
TIERS = {b"nvlink", b"nic", b"fabric", b"core"}


def fabric_unit(name):
    return "ps" if name.endswith("_ps") else "bytes" if name.endswith("_bytes") else "1"


def check_meta(path):
    """/meta attributes, their units.* attributes and the fabric counters of a packet-level run."""
    with h5py.File(path, "r") as f:
        attrs = f["meta"].attrs
        for name, kind in META.items():
            check(name in attrs, f"{path}: /meta.{name} missing")
            if name in attrs:
                v = attrs[name]
                k = "S" if isinstance(v, bytes) else np.asarray(v).dtype.kind
                check(k == kind, f"/meta.{name} kind {k} != {kind}")
            u = attrs.get("units." + name)
            check(u is not None and u.decode() == META_UNITS[name], f"/meta units.{name} = {u!r}")
        check(int(attrs["schema_version"]) == 5, "schema_version != 5")
        for name, (kind, unit) in MEMORY.items():
            if name in attrs:
                check(np.asarray(attrs[name]).dtype.kind == kind, f"/meta.{name} kind")
                u = attrs.get("units." + name)
                check(u is not None and u.decode() == unit, f"/meta units.{name} = {u!r}")
        for name in FABRIC:
            a = "fabric_" + name
            check(a in attrs, f"{path}: /meta.{a} missing")
            if a in attrs:
                check(np.asarray(attrs[a]).dtype == np.dtype("<u8"), f"/meta.{a} dtype {np.asarray(attrs[a]).dtype}")
                u = attrs.get("units." + a)
                check(u is not None and u.decode() == fabric_unit(name), f"/meta units.{a} = {u!r}")
        extra = {k for k in attrs if not k.startswith("units.")} - set(META) - set(MEMORY) - {"fabric_" + n for n in FABRIC}
        check(not extra, f"undocumented /meta attributes {sorted(extra)}")
        check(all(k[len("units."):] in attrs for k in attrs if k.startswith("units.")), "units.X without X")
        return {k: attrs[k] for k in attrs}

UNIT = re.compile(r"\(.*\S.*\)|\[.*\S.*\]")  # a unit in parentheses or brackets


def load_report_module():
    """io/python/fabricsim_results.py as a module (its figures are read as matplotlib objects)."""
    import importlib.util
    import matplotlib
    matplotlib.use("Agg")
    spec = importlib.util.spec_from_file_location("fabricsim_results", os.path.join(SRC, "io/python/fabricsim_results.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_axes_labels(name, fig):
    """Every plotting axes (colour bars aside) has a y label and an x label that name a unit; an
    x label may sit on the panel below when the panels share their x range (stacked plots)."""
    axes = [a for a in fig.axes if a.get_visible() and a.axison and not hasattr(a, "_colorbar")]
    check(axes, f"{name}: no axes")
    labelled_x = [a.get_xlim() for a in axes if a.get_xlabel().strip()]
    for a in axes:
        yl, xl = a.get_ylabel().strip(), a.get_xlabel().strip()
        check(yl and UNIT.search(yl), f"{name}: y label {yl!r} without a unit in ()/[]")
        if xl:
            check(UNIT.search(xl), f"{name}: x label {xl!r} without a unit in ()/[]")
        else:
            check(a.get_xlim() in labelled_x, f"{name}: an axes without x label and no labelled panel below")
    for a in fig.axes:
        if hasattr(a, "_colorbar"):
            lab = (a.get_ylabel() or a.get_xlabel()).strip()
            check(lab and UNIT.search(lab), f"{name}: colour bar label {lab!r} without a unit")


def legend_counts(labels):
    """Series counted by grouped labels: '16 NICs, identical (...)' -> 16, 'NIC of rank 3' -> 1."""
    n = 0
    for lab in labels:
        m = re.match(r"(\d+) \w+s, (identical|coinciding)", lab)
        n += int(m.group(1)) if m else 1
    return n


def check_figures(h5, gph, extra=()):
    """The report's matplotlib Figures of `h5` (a run with `gph` GPUs per host): labels with
    units, a caption each, grouping of identical series, a time axis that leaves out the long
    idle stretches; `extra` names figures that must be there besides the six of every run."""
    mod = load_report_module()
    import matplotlib.pyplot as plt
    figs, _ = mod.figures(mod.load(h5))
    names = [n for n, _, _, _ in figs]
    for want in ("breakdown.png", "busbw.png", "fct_cdf.png", "flow_start_cdf.png", "queues.png", "link_util.png") + extra:
        check(want in names, f"figures: {want} missing ({names})")
    for name, fig, _, cap in figs:
        check_axes_labels(name, fig)
        c = mod.figure_caption(fig)
        check(c and c == cap and len(c) > 20 and "\n" not in c, f"{name}: caption {c!r}")
        for a in fig.axes:
            lg = a.get_legend()
            if lg is not None:
                texts = [t.get_text() for t in lg.get_texts()]
                check(len(texts) <= 10 and len(set(texts)) == len(texts), f"{name}: legend {texts}")
    byname = {n: f for n, f, _, _ in figs}
    # Flow starts: every NIC with inter-host flows is counted exactly once by the legend (grouped
    # lines) or by the band's label; counted here from /flows independently.
    with h5py.File(h5, "r") as f:
        fl = f["flows"][:]
        li = f["links"][:]
        bw = int(f["meta"].attrs["sample_interval_ps"])
    nics = len(set(fl["src"][(fl["src"] // gph) != (fl["dst"] // gph)].tolist()))
    ax = byname["flow_start_cdf.png"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    band = [lab for lab in labels if lab.startswith("range over ")]
    counted = int(re.match(r"range over (\d+)", band[0]).group(1)) if band else legend_counts(labels)
    check(counted == nics, f"flow_start_cdf: legend counts {counted} NICs, /flows has {nics}: {labels}")
    # Time axis: from the first to the last bin with a /links row; idle stretches of at least
    # max(3, 5% of the active bins, 3% of the span) bins are cut out (at most 8, the longest).
    act = np.unique(li["bin_start_ps"] // bw)
    gaps = np.diff(act) - 1
    min_gap = max(3, int(np.ceil(0.05 * len(act))), int(np.ceil(0.03 * (act[-1] - act[0] + 1))))
    want_cuts = int((gaps >= min_gap).sum())
    tax = mod.TimeAxis(li["bin_start_ps"] // bw, bw, 0)
    check(len(tax.segments) - 1 == min(want_cuts, mod.MAX_TIME_BREAKS), f"time axis: {len(tax.segments) - 1} cuts, "
          f"want {want_cuts}")
    check(tax.segments[0][0] == act[0] * bw and tax.segments[-1][1] == (act[-1] + 1) * bw, "time axis span")
    lo, hi = byname["link_util.png"].axes[0].get_xlim()
    check((lo, hi) == (tax.start, tax.length), f"link_util x range {lo, hi} != the active span {tax.start, tax.length}")
    for fig in byname.values():
        plt.close(fig)


def check_grouping():
    """Synthetic series: 16 identical + 1 different -> 2 lines, one labelled with 16; 20 distinct
    -> percentile bands (p50 / p90 / max), not 20 lines; a time axis with two bursts 1 ms apart."""
    mod = load_report_module()
    import matplotlib.pyplot as plt
    x = np.arange(10)
    series = [(r, x, np.sqrt(x)) for r in range(16)] + [(99, x, x.astype(float))]
    fig, ax = plt.subplots()
    how = mod.plot_grouped(ax, series, lambda n: f"NIC {n}", "NICs", "ranks",
                           lambda a, xx, yy, lab, i: a.plot(xx, yy, label=lab), lambda a, s, g: None)
    labels = [ln.get_label() for ln in ax.get_lines()]
    check(how == "lines" and len(labels) == 2, f"grouping: {how} {labels}")
    check(labels[0] == "16 NICs, identical (ranks 0, 1, 2, ... 15)" and labels[1] == "NIC 99", f"grouping labels {labels}")
    check(legend_counts(labels) == 17, f"grouping counts {labels}")
    drawn = []
    how = mod.plot_grouped(ax, [(r, x, x * (r + 1.0)) for r in range(20)], lambda n: f"NIC {n}", "NICs", "ranks",
                           lambda *a: drawn.append(a), lambda a, s, g: drawn.append(("bands", len(s), len(g))))
    check(how == "bands" and drawn == [("bands", 20, 20)], f"20 distinct series: {how} {drawn[:3]}")
    plt.close(fig)
    us = 1_000_000
    tax = mod.TimeAxis(list(range(0, 10)) + list(range(1000, 1010)), us, 2000 * us)
    check(len(tax.segments) == 2 and tax.length == 20 * us + tax.brk and tax.brk > 0, f"time axis {tax.segments}")
    m = tax.map([5 * us, 500 * us, 1005 * us])
    check(m[0] == 5 * us and m[1] == 10 * us + tax.brk / 2 and m[2] == 15 * us + tax.brk, f"time axis map {m}")
    check(tax.unmap(15 * us + tax.brk) == 1005 * us and "cut out" in tax.label() and "(us" in tax.label(),
          f"time axis unmap / label {tax.label()}")


tmp = tempfile.mkdtemp(prefix="fabricsim_results_test_")
h1, h2 = os.path.join(tmp, "np1.h5"), os.path.join(tmp, "np2.h5")
trace = os.path.join(tmp, "trace.json")

r1 = run(["run", "--workload", WORKLOAD] + SETS + ["-o", h1, "--trace", trace, "--trace-ranks", "all", "-q"])
check(r1.returncode == 0, f"run np1: rc {r1.returncode} {r1.stderr}")
r2 = run(["run", "--workload", WORKLOAD] + SETS + ["-o", h2, "-q"], np_=2)
check(r2.returncode == 0, f"run np2: rc {r2.returncode} {r2.stderr}")
if failures:
    sys.exit(1)

# 1. Schema.
with h5py.File(h1, "r") as f:
    check(set(f.keys()) == {"meta"} | set(SCHEMA), f"top-level objects {sorted(f.keys())}")
    attrs = f["meta"].attrs
    check(int(attrs["sample_interval_ps"]) == 5_000_000, "sample_interval_ps != 5us")
    for ds, cols in SCHEMA.items():
        d = f[ds]
        check(list(d.dtype.names) == [c for c, _, _ in cols], f"/{ds} columns {d.dtype.names}")
        for c, kind, unit in cols:
            if c in d.dtype.names:
                check(d.dtype[c].kind == kind, f"/{ds}.{c} kind {d.dtype[c].kind} != {kind}")
            u = d.attrs.get("units." + c)
            check(u is not None and u.decode() == unit, f"/{ds} units.{c} = {u!r}, documented {unit}")
        check(d.attrs["sorted_by"].decode() == SORTED_BY[ds], f"/{ds} sorted_by")
        if ds in ("links", "queues"):
            check(int(d.attrs["bin_width_ps"]) == 5_000_000, f"/{ds} bin_width_ps")
    ranks, colls, flows, links, queues = (f[n][:] for n in ("ranks", "collectives", "flows", "links", "queues"))
    # /link_totals (schema 5): each switch link's bytes are the sum of its /links bins; a
    # single-job run has no job rows and job -1 everywhere.
    lt = f["link_totals"][:]
    check(len(lt) > 0, "/link_totals is empty")
    for row in lt:
        b = int(links["bytes"][links["link_id"] == row["link_id"]].sum())
        check(int(row["bytes"]) == b, f"/link_totals link {row['link_id']}: {row['bytes']} B != /links sum {b}")
    check(len(f["jobs"]) == 0, "/jobs has rows in a single-job run")
    check(bool((ranks["job"] == -1).all()) and bool((flows["job"] == -1).all()), "job != -1 in a single-job run")
    gph = 8
check_meta(h1)
check(set(links["tier"].tolist()) <= TIERS, f"/links tiers {set(links['tier'].tolist())}")

# 2. Conservation laws.
checked = 0
for c in colls:
    n, s, op = int(c["ranks"]), int(c["bytes"]), c["op"].decode()
    if n < 2 or s % n:
        continue
    want = {"all_reduce": 2 * (n - 1) * s, "all_gather": (n - 1) * s, "reduce_scatter": (n - 1) * s}.get(op)
    if want is None:
        continue
    sel = (flows["group"] == c["group"]) & (flows["instance"] == c["instance"])
    got = int(flows["bytes"][sel].sum())
    check(got == want, f"{op} group {c['group']} inst {c['instance']}: flow bytes {got} != {want}")
    checked += 1
check(checked > 0, "no ring collective checked for flow-byte conservation")
print(f"flow bytes == closed form for {checked} collectives")
check((flows["fct_ps"] == flows["end_ps"] - flows["start_ps"]).all(), "fct != end - start")
check(((flows["first_byte_ps"] > flows["start_ps"]) & (flows["first_byte_ps"] <= flows["end_ps"])).all(),
      "first byte outside (start, end]")
check((flows["slowdown"] >= 1.0).all(), f"slowdown < 1: min {flows['slowdown'].min()}")
inter = (flows["src"] // gph) != (flows["dst"] // gph)
check(((flows["first_spine"] >= -1) & (flows["first_spine"] < 2)).all(), "first_spine out of range")
check((flows["first_spine"][~inter] == -1).all(), "intra-host flow crossed a spine")
gpu_links = links[links["from_node"] < len(ranks)]
nic_bytes = int(gpu_links["bytes"][gpu_links["tier"] == b"nic"].sum())
nvl_bytes = int(gpu_links["bytes"][gpu_links["tier"] == b"nvlink"].sum())
check(nic_bytes == int(flows["bytes"][inter].sum()), f"NIC link bytes {nic_bytes} != inter-host flow bytes")
check(nvl_bytes == int(flows["bytes"][~inter].sum()), f"NVLink link bytes {nvl_bytes} != intra-host flow bytes")
check((links["utilization"] <= 1.0 + 1e-9).all() and (links["utilization"] >= 0).all(), "utilization outside [0, 1]")
# A row exists for traffic, a PFC pause, an ECN mark or a drop in the bin (schema 3).
check(((links["bytes"] > 0) | (links["pause_ps"] > 0) | (links["pfc_pauses"] > 0) | (links["ecn_marks"] > 0) |
       (links["drops"] > 0)).all(), "a /links row without bytes, pause, marks or drops")
check(((links["pause_ps"] >= 0) & (links["pause_ps"] <= 5_000_000)).all(), "pause_ps outside [0, bin width]")
check((np.diff(links["link_id"].astype(np.int64)) >= 0).all(), "/links not sorted")
check(len(queues) > 0, "no /queues rows")
# Ring collectives here never contend at a switch (queues stay 0); an AllToAll across two hosts
# fans in at the leaf ports: a backlog must show up, and never exceed what the senders offered.
qh = os.path.join(tmp, "a2a.h5")
r = run(["run", "--workload", os.path.join(SRC, "tests/data/chakra/astra-sim/examples/workload/microbenchmarks/"
                                                "all_to_all/8npus_1MB/all_to_all"),
         "--set", "cluster.gpus_per_host=4", "--set", "simccl.planner=ring", "-o", qh, "-q"])
check(r.returncode == 0, f"alltoall run rc {r.returncode} {r.stderr}")
with h5py.File(qh, "r") as f:
    q = f["queues"][:]
    fb = int(f["flows"]["bytes"].sum())
check((q["max_queue_bytes"] > 0).any(), "no queue built up under AllToAll fan-in")
check(int(q["max_queue_bytes"].max()) <= fb, "queue larger than all bytes sent")

# 3. 1 vs 2 processes: identical datasets (meta differs only in processes and wall_s).
with h5py.File(h1, "r") as a, h5py.File(h2, "r") as b:
    for ds in SCHEMA:
        check(a[ds].dtype == b[ds].dtype and a[ds].shape == b[ds].shape and
              a[ds][:].tobytes() == b[ds][:].tobytes(), f"/{ds} differs between 1 and 2 processes")
    for k in list(META) + ["fabric_" + n for n in FABRIC]:
        if k not in ("processes", "wall_s", "spec_text"):
            check(a["meta"].attrs[k] == b["meta"].attrs[k], f"/meta.{k} differs between 1 and 2 processes")
    check(int(b["meta"].attrs["processes"]) == 2, "processes != 2")

# 4. Trace-event JSON.
with open(trace) as fh:
    tj = json.load(fh)
ev = tj["traceEvents"]
xs = [e for e in ev if e.get("ph") == "X"]
check(len(xs) > 0, "no X events")
cs = [e for e in ev if e.get("ph") == "C"]
check(len(cs) > 0, "no NIC counter (C) events")
for e in cs:
    check(isinstance(e.get("ts"), (int, float)) and len(e.get("args", {})) == 1 and
          all(isinstance(v, (int, float)) and v >= 0 for v in e["args"].values()), f"bad counter event: {e}")
for e in ev:
    check(all(k in e for k in ("ph", "pid", "tid", "name")), f"event without ph/pid/tid/name: {e}")
for e in xs:
    ok = all(k in e for k in ("ts", "dur")) and isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    check(ok, f"X event without numeric ts/dur: {e}")
    check(abs(e["ts"] - e["args"]["start_ps"] / 1e6) < 1e-6 and
          abs(e["dur"] - (e["args"]["end_ps"] - e["args"]["start_ps"]) / 1e6) < 1e-6, f"ts/dur != ps args: {e}")
lanes = {}
for e in xs:
    lanes.setdefault((e["pid"], e["tid"]), []).append((e["args"]["start_ps"], e["args"]["end_ps"]))
for key, iv in lanes.items():
    iv.sort()
    check(all(iv[i][1] <= iv[i + 1][0] for i in range(len(iv) - 1)), f"overlapping events on pid/tid {key}")
for r in ranks:
    rk = int(r["rank"])
    comp = sum(e["args"]["end_ps"] - e["args"]["start_ps"] for e in xs if e["pid"] == rk and e["tid"] == 0)
    comm_iv = sorted((e["args"]["start_ps"], e["args"]["end_ps"]) for e in xs if e["pid"] == rk and e["tid"] > 0)
    union, cur_s, cur_e = 0, None, None
    for s_, e_ in comm_iv:
        if cur_e is None or s_ > cur_e:
            union += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s_, e_
        else:
            cur_e = max(cur_e, e_)
    union += 0 if cur_e is None else cur_e - cur_s
    check(comp == int(r["compute_ps"]), f"rank {rk}: trace compute {comp} != /ranks {r['compute_ps']}")
    check(union == int(r["comm_ps"]), f"rank {rk}: trace comm union {union} != /ranks {r['comm_ps']}")
print(f"trace: {len(xs)} events, {len(ranks)} ranks match /ranks")
# Rank range: 0-3 only.
t03 = os.path.join(tmp, "t03.json")
r = run(["run", "--workload", WORKLOAD] + SETS + ["-o", os.path.join(tmp, "x.h5"), "--trace", t03,
                                                  "--trace-ranks", "2-3", "-q"])
check(r.returncode == 0, f"--trace-ranks run rc {r.returncode}")
with open(t03) as fh:
    pids = {e["pid"] for e in json.load(fh)["traceEvents"]}
check(pids == {2, 3}, f"--trace-ranks 2-3 traced pids {sorted(pids)}")
r = run(["run", "--workload", WORKLOAD, "-o", os.path.join(tmp, "y.h5"), "--trace", t03, "--trace-ranks", "5-2"])
check(r.returncode == 2 and r.stderr.count("\n") == 1, f"bad --trace-ranks: rc {r.returncode} {r.stderr!r}")

# 5. report + compare.
try:
    import matplotlib  # noqa: F401
    have_mpl = True
except ImportError:
    have_mpl = False
    print("SKIP report: python3-matplotlib is not installed for /usr/bin/python3 (scripts/setup.sh installs it)")
if have_mpl:
    check_grouping()
    rep = os.path.join(tmp, "report")
    r = run(["report", h1, "-o", rep])
    check(r.returncode == 0, f"report rc {r.returncode} {r.stderr}")
    for png in ("breakdown.png", "busbw.png", "fct_cdf.png", "flow_start_cdf.png", "queues.png", "link_util.png"):
        p = os.path.join(rep, png)
        ok = os.path.isfile(p) and open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(p) > 5000
        check(ok, f"report: {png} missing or not a PNG")
        check(png in open(os.path.join(rep, "index.html")).read(), f"index.html does not embed {png}")
    check_figures(h1, 8)

r = run(["compare", h1, h2])
check(r.returncode == 0 and "iteration time" in r.stdout and "+0.00%" in r.stdout, f"compare: {r.stdout} {r.stderr}")
r = run(["compare", h1, os.path.join(tmp, "missing.h5")])
check(r.returncode == 2, f"compare missing file rc {r.returncode}")

# Damaged results files: bytes overwritten in the middle (the compressed table chunks fail to
# inflate) and a file cut in half. Each is one line naming the file, exit 2 (was exit 3 with an
# h5py OSError for the overwritten one).
raw = open(h1, "rb").read()
flipped = bytearray(raw)
for i in range(len(raw) // 4, 3 * len(raw) // 4):
    flipped[i] ^= 0xFF
bad_h5 = {"flipped": os.path.join(tmp, "flipped.h5"), "truncated": os.path.join(tmp, "truncated.h5")}
open(bad_h5["flipped"], "wb").write(bytes(flipped))
open(bad_h5["truncated"], "wb").write(raw[: len(raw) // 2])
# A few bytes of one table's data chunk overwritten (the metadata intact): the chunk's Fletcher-32
# checksum (the writer's filter) catches it; before, such a file could be read with wrong numbers.
with h5py.File(h1, "r") as f:
    chunked = [name for name in ("ranks", "collectives") if name in f and f[name].chunks is not None]
    check(chunked and all(f[n].id.get_create_plist().get_nfilters() >= 1 for n in chunked), "tables carry no filter")
    filters = [f[chunked[0]].id.get_create_plist().get_filter(i)[0] for i in range(f[chunked[0]].id.get_create_plist().get_nfilters())]
    check(h5py.h5z.FILTER_FLETCHER32 in filters, f"no Fletcher-32 filter on /{chunked[0]}: {filters}")
    info = f[chunked[0]].id.get_chunk_info(0)
poked = bytearray(raw)
mid = info.byte_offset + info.size // 2
for i in range(mid, min(mid + 4, info.byte_offset + info.size)):
    poked[i] ^= 0x5A
bad_h5["chunk"] = os.path.join(tmp, "chunk.h5")
open(bad_h5["chunk"], "wb").write(bytes(poked))
for kind, path in bad_h5.items():
    for args in (["compare", h1, path], ["compare", path, h1], ["report", path, "-o", os.path.join(tmp, "rep_" + kind)]):
        r = run(args)
        one = r.stderr.strip()
        check(r.returncode == 2 and one.count("\n") == 0 and one.startswith("fabricsim: error: " + path + ": ")
              and "Traceback" not in one, f"{args[0]} of a {kind} file: rc {r.returncode} {r.stderr!r}")
    check(not os.path.exists(os.path.join(tmp, "rep_" + kind)), f"report of a {kind} file left a directory")

# 6. Read-only output directory -> exit 2. As root, permissions do not bind; /proc refuses new files.
ro = os.path.join(tmp, "ro")
os.mkdir(ro)
os.chmod(ro, 0o555)
ro_dir = ro if os.geteuid() != 0 else "/proc"
r = run(["run", "--workload", WORKLOAD, "-o", os.path.join(ro_dir, "out.h5")])
check(r.returncode == 2 and r.stderr.strip().count("\n") == 0, f"run into read-only dir: rc {r.returncode} {r.stderr!r}")
if have_mpl:
    r = run(["report", h1, "-o", os.path.join(ro_dir, "rep")])
    check(r.returncode == 2 and r.stderr.strip().count("\n") == 0, f"report into read-only dir: rc {r.returncode} {r.stderr!r}")

# SIGTERM half way: no complete-looking file, no temporary file left.
killed = os.path.join(tmp, "killed.h5")
p = subprocess.Popen([FAB, "run", "--set", "workload.generator.model=gpt3-175b", "--set", "workload.generator.gpu=A100",
                      "--set", "workload.generator.tp=8", "--set", "workload.generator.pp=2", "--set",
                      "workload.generator.dp=2", "--set", "workload.generator.global_batch=4", "-o", killed, "-q"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.5)
still_running = p.poll() is None
p.send_signal(signal.SIGTERM)
p.wait(timeout=60)
check(still_running, "the long run finished within 1.5 s; the kill test needs a longer workload")
check(not os.path.exists(killed), "a killed run left the output file")
check(not any(n.startswith("killed.h5") for n in os.listdir(tmp)), f"a killed run left {os.listdir(tmp)}")

# 7. Packet runs that provoke PFC, ECN and drops: the /links columns sum to the /meta totals.
# An AllToAll of 8 hosts (1 GPU each, 4 per leaf, one spine): with 1600 Gb/s uplinks and 512 KiB
# of buffer (mostly PFC headroom) the receivers' leaf ports congest, XOFFs pause the spine, the
# leaves and the NICs; low ECN thresholds mark. Without PFC, 100 Gb/s uplinks and DCQCN: drops,
# marks, CNPs and retransmissions.
A2A = os.path.join(SRC, "tests/data/chakra/astra-sim/examples/workload/microbenchmarks/all_to_all/8npus_1MB/all_to_all")
PKT = ["--workload", A2A, "--set", "cluster.gpus_per_host=1", "--set", "cluster.nics_per_leaf=4", "--set",
       "cluster.spines=1", "--set", "output.sample_interval=1us"]
pfc_h5, lossy_h5 = os.path.join(tmp, "pfc.h5"), os.path.join(tmp, "lossy.h5")
r = run(["run"] + PKT + ["--set", "nic.cc=none", "--set", "cluster.fabric_bandwidth=1600Gbps", "--set",
                         "switch.buffer=512KiB", "--set", "switch.ecn_kmin=2KB", "--set", "switch.ecn_kmax=8KB",
                         "-o", pfc_h5, "-q"])
check(r.returncode == 0, f"PFC run rc {r.returncode} {r.stderr}")
r = run(["run"] + PKT + ["--set", "nic.cc=dcqcn", "--set", "cluster.fabric_bandwidth=100Gbps", "--set",
                         "switch.pfc=false", "--set", "switch.buffer=1MiB", "-o", lossy_h5, "-q"])
check(r.returncode == 0, f"lossy run rc {r.returncode} {r.stderr}")
for path, lossless in ((pfc_h5, True), (lossy_h5, False)):
    if not os.path.isfile(path):
        continue
    m = check_meta(path)
    fab = {n: int(m["fabric_" + n]) for n in FABRIC if "fabric_" + n in m}
    with h5py.File(path, "r") as f:
        li = f["links"][:]
    xoff, paused = int(li["pfc_pauses"].sum()), int(li["pause_ps"].sum())
    marks, drops = int(li["ecn_marks"].sum()), int(li["drops"].sum())
    name = os.path.basename(path)
    print(f"{name}: {fab}; /links sums: pfc_pauses {xoff}, pause_ps {paused}, ecn_marks {marks}, drops {drops}")
    # Every XOFF a switch sends pauses one transmitter (a switch egress or a NIC port); all were
    # delivered (the run ends with the traffic drained and every XON sent).
    check(xoff == fab.get("pause_frames"), f"{name}: sum pfc_pauses {xoff} != fabric_pause_frames")
    check(fab.get("pause_frames") == fab.get("resume_frames"), f"{name}: pause frames != resume frames")
    check(paused == fab.get("switch_paused_ps", 0) + fab.get("nic_paused_ps", 0),
          f"{name}: sum pause_ps {paused} != switch + NIC paused ps")
    check(marks == fab.get("ecn_marks"), f"{name}: sum ecn_marks {marks} != fabric_ecn_marks")
    check(drops == fab.get("drops"), f"{name}: sum drops {drops} != fabric_drops")
    nic_xoff = int(li["pfc_pauses"][li["from_node"] < int(m["ranks"])].sum())
    check(nic_xoff == fab.get("nic_pauses"), f"{name}: NIC-port pfc_pauses {nic_xoff} != fabric_nic_pauses")
    check(((li["pause_ps"] >= 0) & (li["pause_ps"] <= 1_000_000)).all(), f"{name}: pause_ps outside [0, bin]")
    if lossless:
        check(fab.get("pause_frames", 0) > 0 and fab.get("switch_paused_ps", 0) > 0 and fab.get("nic_paused_ps", 0) > 0,
              f"{name}: the scenario must pause switches and NICs")
        check(marks > 0 and drops == 0, f"{name}: want ECN marks and no drops with PFC, got {marks}, {drops}")
    else:
        check(drops > 0 and marks > 0 and fab.get("cnps", 0) > 0 and fab.get("retransmits", 0) > 0 and xoff == 0,
              f"{name}: want drops, marks, CNPs, retransmits and no pauses without PFC")
if have_mpl and os.path.isfile(pfc_h5):
    rep = os.path.join(tmp, "report_pfc")
    r = run(["report", pfc_h5, "-o", rep])
    check(r.returncode == 0, f"report (PFC run) rc {r.returncode} {r.stderr}")
    page = open(os.path.join(rep, "index.html")).read() if r.returncode == 0 else ""
    for png in ("pfc.png", "ecn_drops.png"):
        p = os.path.join(rep, png)
        check(os.path.isfile(p) and os.path.getsize(p) > 5000 and png in page, f"report (PFC run): {png} missing")
    check("fabric pause_frames" in page and "no PFC pauses" not in page, "report (PFC run): fabric counters table")
    check_figures(pfc_h5, 1, ("pfc.png", "ecn_drops.png"))
    page = open(os.path.join(tmp, "report", "index.html")).read() if os.path.isdir(os.path.join(tmp, "report")) else ""
    want_none = int(check_meta(h1).get("fabric_pause_frames", 0)) == 0
    check(("no PFC pauses in this run" in page) == want_none, "report: 'no PFC pauses in this run' note")
if os.path.isfile(pfc_h5) and os.path.isfile(lossy_h5):
    r = run(["compare", pfc_h5, lossy_h5])
    check(r.returncode == 0 and all(k in r.stdout for k in ("fabric PFC pause frames", "fabric ECN marks",
                                                            "fabric CNPs", "fabric drops", "fabric retransmits")),
          f"compare with fabric counters: {r.stdout} {r.stderr}")

os.chmod(ro, 0o755)
if failures:
    print(f"{len(failures)} failures; files in {tmp}")
    sys.exit(1)
shutil.rmtree(tmp, ignore_errors=True)  # kept above when something failed
print("OK")
