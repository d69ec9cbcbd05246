#!/usr/bin/python3
"""Compares per-packet delays of the ns-3 chain (tests/ns3/ns3_chain.cc) with fabricsim's.

  compare_delays.py NS3.csv FABRICSIM.h5|FABRICSIM.csv [--receiver R] [--tolerance-ps T]
                    [--lost-if-fct-ps F]
  compare_delays.py --self-test

Pairing (docs/validation_ns3.md): fabricsim runs the workload of ns3_chain_workload, so every
ns-3 UDP packet (sender s, seq k) is one fabricsim flow of one packet from rank s to the
receiver rank R (default: number of senders in the ns-3 CSV). The k-th flow of rank s in
flow_id order (flow_id = (src << 32) | per-source counter, docs/hdf5_schema.md) is seq k.

fabricsim side: HDF5 `/flows` (columns src, dst, bytes, start_ps, end_ps, fct_ps; optional
`dropped`) or a CSV with the same column names (flow_id optional; rows then in issue order per
src). A flow counts as dropped if it has dropped != 0, end_ps < 0, or is missing (fewer flows
than ns-3 packets for that sender; only the tail can be missing without a flow_id). With
--lost-if-fct-ps F, a flow with end_ps - start_ps >= F also counts as dropped: for runs where a
lost packet is recovered only by a retransmission timeout longer than F (case (b2),
docs/validation_ns3.md).

Delay compared: ns-3 recv_time_ps - send_time_ps against fabricsim end_ps - start_ps, both in
integer ps. Also reported: send-instant offsets (start_ps - send_time_ps), which must be
constant for the runs to describe the same traffic.

Exit codes: 0 all delays within tolerance and the same packets dropped; 1 a mismatch (the first
ones are listed); 2 bad input (one line: file, problem, fix).
"""
import argparse
import csv
import os
import sys
import tempfile


def fail(where, problem, fix, code=2):
    print(f"compare_delays: error: {where}: {problem}; {fix}", file=sys.stderr)
    sys.exit(code)


NS3_COLUMNS = ["sender", "seq", "send_time_ps", "recv_time_ps", "delay_ps", "dropped", "wire_bytes"]


def read_ns3(path):
    """ns-3 rows as {(sender, seq): (send_ps, recv_ps or None)}."""
    if not os.path.isfile(path):
        fail(path, "no such file", "give the CSV written by ns3_chain --out")
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r, None)
        if header != NS3_COLUMNS:
            fail(path, f"header {header} is not ns3_chain's", "give the CSV written by ns3_chain --out")
        out = {}
        for lineno, row in enumerate(r, start=2):
            try:
                s, k, send, recv, _, dropped, _ = (int(x) for x in row)
            except ValueError:
                fail(f"{path}:{lineno}", "malformed row", "regenerate it with ns3_chain")
            out[(s, k)] = (send, None if dropped else recv)
    return out


def read_fabricsim(path):
    """fabricsim flows as a list of dicts with src, dst, start_ps, end_ps, dropped, flow_id."""
    if not os.path.isfile(path):
        fail(path, "no such file", "give fabricsim's HDF5 (run -o) or a flows CSV")
    rows = []
    if path.endswith(".h5") or path.endswith(".hdf5"):
        try:
            import h5py
        except ImportError:
            fail("python", f"h5py is not importable by {sys.executable}",
                 "install python3-h5py (scripts/setup.sh) and use /usr/bin/python3")
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            fail(path, f"not an HDF5 file ({e})", "give the HDF5 file written by fabricsim run -o")
        with f:
            if "flows" not in f:
                fail(path, "has no /flows", "give a fabricsim results file (docs/hdf5_schema.md)")
            t = f["flows"][:]
            names = t.dtype.names
            for need in ("src", "dst", "start_ps", "end_ps"):
                if need not in names:
                    fail(path, f"/flows has no column {need}", "use schema 2 or newer")
            for i in range(len(t)):
                rows.append({
                    "src": int(t["src"][i]), "dst": int(t["dst"][i]),
                    "start_ps": int(t["start_ps"][i]), "end_ps": int(t["end_ps"][i]),
                    "dropped": int(t["dropped"][i]) if "dropped" in names else 0,
                    "flow_id": int(t["flow_id"][i]) if "flow_id" in names else i,
                })
    else:
        with open(path, newline="") as f:
            r = csv.DictReader(f)
            for need in ("src", "dst", "start_ps", "end_ps"):
                if need not in (r.fieldnames or []):
                    fail(path, f"no column {need}", "CSV needs src,dst,start_ps,end_ps")
            for i, row in enumerate(r):
                try:
                    rows.append({
                        "src": int(row["src"]), "dst": int(row["dst"]),
                        "start_ps": int(row["start_ps"]), "end_ps": int(row["end_ps"]),
                        "dropped": int(row.get("dropped") or 0),
                        "flow_id": int(row["flow_id"]) if row.get("flow_id") else i,
                    })
                except ValueError:
                    fail(f"{path}:{i + 2}", "malformed row", "integers only")
    return rows


def compare(ns3, flows, receiver, tolerance_ps, show=10, lost_if_fct_ps=None):
    """Returns (ok, report lines)."""
    senders = sorted({s for s, _ in ns3})
    if receiver is None:
        receiver = len(senders)
    by_src = {}
    for fl in flows:
        if fl["dst"] == receiver:
            by_src.setdefault(fl["src"], []).append(fl)
    lines, bad = [], []
    matched = drops_both = 0
    max_abs = 0
    offsets = set()
    for s in senders:
        seqs = sorted(k for ss, k in ns3 if ss == s)
        fls = sorted(by_src.get(s, []), key=lambda x: x["flow_id"])
        if len(fls) > len(seqs):
            bad.append(f"sender {s}: fabricsim has {len(fls)} flows to rank {receiver}, ns-3 {len(seqs)} packets")
        for k in seqs:
            send, recv = ns3[(s, k)]
            fl = fls[k] if k < len(fls) else None
            f_dropped = fl is None or fl["dropped"] != 0 or fl["end_ps"] < 0 or (
                lost_if_fct_ps is not None and fl["end_ps"] - fl["start_ps"] >= lost_if_fct_ps)
            if recv is None or f_dropped:
                if recv is None and f_dropped:
                    drops_both += 1
                else:
                    who = "ns-3" if recv is None else "fabricsim"
                    bad.append(f"sender {s} seq {k}: dropped only in {who}")
                if fl is not None:
                    offsets.add(fl["start_ps"] - send)
                continue
            d_ns3 = recv - send
            d_fab = fl["end_ps"] - fl["start_ps"]
            offsets.add(fl["start_ps"] - send)
            matched += 1
            diff = d_fab - d_ns3
            max_abs = max(max_abs, abs(diff))
            if abs(diff) > tolerance_ps:
                bad.append(f"sender {s} seq {k}: delay ns-3 {d_ns3} ps, fabricsim {d_fab} ps ({diff:+d})")
    if len(offsets) > 1:
        bad.append(f"send instants differ by a non-constant offset (fabricsim - ns-3: "
                   f"{min(offsets)}..{max(offsets)} ps): the runs are not the same traffic")
    lines.append(f"packets: {len(ns3)}; delays compared: {matched}; dropped in both: {drops_both}; "
                 f"max |fabricsim - ns-3| = {max_abs} ps (tolerance {tolerance_ps} ps)")
    if offsets:
        lines.append(f"send offset fabricsim - ns-3: {sorted(offsets)[:3]} ps")
    for b in bad[:show]:
        lines.append("MISMATCH " + b)
    if len(bad) > show:
        lines.append(f"... and {len(bad) - show} more mismatches")
    return not bad, lines


def self_test():
    """Writes a small ns-3 CSV and matching fabricsim files (HDF5 with the /flows compound
    layout, and CSV), checks a clean match, a 1 ps perturbation and a drop mismatch."""
    import numpy as np
    import h5py
    ns3 = {(0, 0): (1000000, 4370800), (0, 1): (2000000, None), (1, 0): (1000000, 5000000)}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "ns3.csv")
        with open(p, "w") as f:
            f.write(",".join(NS3_COLUMNS) + "\n")
            for (s, k), (send, recv) in sorted(ns3.items()):
                dr = recv is None
                f.write(f"{s},{k},{send},{-1 if dr else recv},{-1 if dr else recv - send},{int(dr)},1030\n")
        read = read_ns3(p)
        assert read == ns3, read
        dt = np.dtype([("flow_id", "<u8"), ("src", "<u4"), ("dst", "<u4"), ("bytes", "<u8"),
                       ("start_ps", "<i8"), ("end_ps", "<i8"), ("fct_ps", "<i8")])
        good = [((0 << 32) | 0, 0, 2, 1000, 1000000, 4370800, 3370800),
                ((1 << 32) | 0, 1, 2, 1000, 1000000, 5000000, 4000000)]
        h = os.path.join(d, "fab.h5")
        with h5py.File(h, "w") as f:
            f.create_dataset("flows", data=np.array(good, dtype=dt))
        ok, lines = compare(read, read_fabricsim(h), None, 0)
        assert ok, lines
        c = os.path.join(d, "fab.csv")
        with open(c, "w") as f:
            f.write("src,dst,bytes,start_ps,end_ps,fct_ps\n0,2,1000,1000000,4370801,3370801\n"
                    "0,2,1000,2000000,-1,-1\n1,2,1000,1000000,5000000,4000000\n")
        ok, lines = compare(read, read_fabricsim(c), None, 0)
        assert not ok and any("+1)" in x for x in lines), lines
        ok, lines = compare(read, read_fabricsim(c), None, 1)
        assert ok, lines
        with open(c, "w") as f:
            f.write("src,dst,bytes,start_ps,end_ps,fct_ps\n0,2,1000,1000000,4370800,3370800\n"
                    "0,2,1000,2000000,5370800,3370800\n1,2,1000,1000000,5000000,4000000\n")
        ok, lines = compare(read, read_fabricsim(c), None, 0)
        assert not ok and any("dropped only in ns-3" in x for x in lines), lines
        # The same packet delivered only after a (long) retransmission timeout counts as lost.
        with open(c, "w") as f:
            f.write("src,dst,bytes,start_ps,end_ps,fct_ps\n0,2,1000,1000000,4370800,3370800\n"
                    "0,2,1000,2000000,1000002000000,1000000000000\n1,2,1000,1000000,5000000,4000000\n")
        ok, lines = compare(read, read_fabricsim(c), None, 0, lost_if_fct_ps=10**12)
        assert ok, lines
        ok, lines = compare(read, read_fabricsim(c), None, 0, lost_if_fct_ps=10**12 + 1)
        assert not ok and any("dropped only in ns-3" in x for x in lines), lines
    print("compare_delays: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ns3_csv", nargs="?")
    ap.add_argument("fabricsim", nargs="?", help="fabricsim results .h5 or flows .csv")
    ap.add_argument("--receiver", type=int, default=None,
                    help="fabricsim rank of the receiver (default: number of ns-3 senders)")
    ap.add_argument("--tolerance-ps", type=int, default=0, help="allowed |delay difference|, ps")
    ap.add_argument("--lost-if-fct-ps", type=int, default=None,
                    help="count a fabricsim flow with end_ps - start_ps >= this as dropped "
                         "(lost packets recovered only by a longer retransmission timeout)")
    ap.add_argument("--self-test", action="store_true", help="check this script and exit")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.ns3_csv or not a.fabricsim:
        fail("<cli>", "two files needed", "compare_delays.py NS3.csv FABRICSIM.h5")
    ok, lines = compare(read_ns3(a.ns3_csv), read_fabricsim(a.fabricsim), a.receiver, a.tolerance_ps,
                        lost_if_fct_ps=a.lost_if_fct_ps)
    print("\n".join(lines))
    print("compare_delays: " + ("MATCH" if ok else "DIFFER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
