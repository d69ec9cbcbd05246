#!/usr/bin/env python3
"""Writes the Chakra fuzz seeds for the CPU-op and process-group metadata paths of io/chakra_reader
(tests/data/bad/fuzz/chakra/): each node is encoded by `protoc --encode` from io/et_def.proto and
length-delimited as Chakra's writer does. Usage: scripts/gen_chakra_fuzz_seeds.py (from the repo root)."""
import subprocess

PROTO = "io/et_def.proto"
OUT = "tests/data/bad/fuzz/chakra/"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def enc(msg, text):
    data = subprocess.run(["protoc", "--proto_path=io", "--encode=ChakraProtoMsg." + msg, PROTO],
                          input=text.encode(), capture_output=True, check=True).stdout
    return varint(len(data)) + data


def attr(name, kind, value):
    return 'attr { name: "%s" %s: %s }' % (name, kind, value)


def coll(i, dep, ctype, size, pg):
    return enc("Node", 'id: %d name: "coll%d" type: COMM_COLL_NODE data_deps: %d %s %s %s' % (
        i, i, dep, attr("comm_type", "int64_val", ctype), attr("comm_size", "int64_val", size),
        attr("pg_name", "string_val", '"%s"' % pg)))


def pg_init(i, js):
    return enc("Node", 'id: %d name: "## process_group:init ##" type: METADATA_NODE inputs { values: "%s" }' % (
        i, ("['" + js + "']").replace('"', '\\"')))


META = enc("GlobalMetadata", 'version: "0.0.4"')
# ALL_REDUCE 0, ALL_GATHER 2 (CollectiveCommType of et_def.proto).
PGS = ('[{"pg_name": "0", "pg_desc": "default_pg", "ranks": [], "pg_size": 8}, '
       '{"pg_name": "3", "pg_desc": "tp", "ranks": [0, 1], "pg_size": 2}, '
       '{"pg_name": "7", "pg_desc": "dp", "ranks": [0, 2, 4, 6], "pg_size": 4}]')
seeds = {
    # Rank 0 only, TP=2 (stride 1) x DP=4 (stride 2): replicated to the 8 ranks pg_size gives.
    "ok-pg-metadata-rank0-tp2-dp4-replicated.et":
        META + pg_init(1, PGS) + coll(2, 1, 0, 4096, "3") + coll(3, 2, 2, 8192, "7") + coll(4, 3, 0, 64, "0"),
    # A CPU-side op (is_cpu_op true) then a GPU kernel that depends on it.
    "ok-is_cpu_op-host-then-kernel.et":
        META + enc("Node", 'id: 1 name: "cpu1" type: COMP_NODE duration_micros: 9 ' + attr("is_cpu_op", "bool_val", "true"))
        + enc("Node", 'id: 2 name: "comp2" type: COMP_NODE duration_micros: 4 data_deps: 1 '
              + attr("is_cpu_op", "bool_val", "false")),
    # Rank 0's group {0, 1, 3} has no uniform stride: cannot be replicated.
    "bad-pg-metadata-nonuniform-stride.et":
        META + pg_init(1, '[{"pg_name": "0", "ranks": [], "pg_size": 8}, {"pg_name": "5", "ranks": [0, 1, 3], "pg_size": 3}]')
        + coll(2, 1, 0, 64, "5"),
    # is_cpu_op given as a string.
    "bad-is_cpu_op-not-bool.et":
        META + enc("Node", 'id: 1 name: "comp1" type: COMP_NODE duration_micros: 1 ' + attr("is_cpu_op", "string_val", '"yes"')),
}
for name, data in seeds.items():
    with open(OUT + name, "wb") as f:
        f.write(data)
# The same rank-0 trace read with workload.gpus 16 (feed_chakra's "--fabricsim-gpus=" line).
with open(OUT + "ok-pg-metadata-rank0-gpus16.et", "wb") as f:
    f.write(b"--fabricsim-gpus=16\n" + seeds["ok-pg-metadata-rank0-tp2-dp4-replicated.et"])
