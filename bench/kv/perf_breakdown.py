#!/usr/bin/env python3
"""Where server CPU goes: reads `perf script -F pid,tid,ip,sym` of a call-graph profile (perf record
-g) on stdin and prints, per process and for all of them, the share of samples in each category.

  perf record -e cpu-clock -F 1999 -g -p PID1,PID2,PID3 -o put.data -- sleep 5   # during a load
  perf script -i put.data -F pid,tid,ip,sym | bench/kv/perf_breakdown.py PID1=leader PID2=follower

A sample goes to the first category (in the order below) whose pattern matches any frame of its
stack, so a RocksDB call made while applying counts as "state machine apply" and a futex wait
inside gRPC counts as scheduling. The categories are coarse on purpose: they answer "which part of
the server do we make cheaper first", not "which line".
"""
import collections
import re
import sys

CATEGORIES = [
    ("scheduling: context switch, futex, epoll", r"finish_task_switch|__schedule|futex|epoll_wait"),
    ("WAL write + fdatasync", r"fdatasync|epoch::wal::|pwrite"),
    ("idempotency prune", r"PruneIdempotency"),
    ("state machine apply (RocksDB)",
     r"KvStore::ApplyBatch|KvStore::WriteBatchAndPublish|KvStateMachine::Apply|ApplyEntry|rocksdb::"),
    ("raft core", r"epoch::raft::"),
    ("peer transport", r"PeerTransport|peer_codec|EncodeFrame|DecodeFrame|raftpb::"),
    ("gRPC (server, client, forwarding)", r"grpc|gpr_|LeaderForwarder|chttp2"),
    ("TCP syscalls", r"sendmsg|recvmsg|tcp_|__libc_recv|__libc_send|sock_"),
    ("raft driver, asio", r"RaftDriver|asio::"),
    ("protobuf", r"google::protobuf|_InternalParse|_InternalSerialize"),
    ("malloc/free",
     r"malloc|_int_free|cfree|unlink_chunk|operator new|operator delete|tcmalloc::|tc_new|tc_delete|tc_free"),
    ("abseil mutex deadlock detection", r"GraphCycles|DeadlockCheck"),
]
COMPILED = [(name, re.compile(rx)) for name, rx in CATEGORIES]
HEADER = re.compile(r"^\s*(\d+)/(\d+)\s*$")


def main():
    roles = dict(arg.split("=", 1) for arg in sys.argv[1:])
    by_pid = collections.defaultdict(collections.Counter)
    other_leaf = collections.Counter()
    pid, stack = None, []

    def flush():
        if pid is None:
            return
        text = "\n".join(stack)
        for name, rx in COMPILED:
            if rx.search(text):
                by_pid[pid][name] += 1
                return
        by_pid[pid]["other"] += 1
        other_leaf[stack[0].split(None, 1)[-1] if stack else "?"] += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            pid, stack = None, []
        elif HEADER.match(line):
            # "pid/tid" alone on a line; some perf versions indent it like the frames below it.
            pid, stack = HEADER.match(line).group(1), []
        else:
            stack.append(line.strip())
    flush()

    total = sum(sum(c.values()) for c in by_pid.values())
    if total == 0:
        print("no samples")
        return
    everything = collections.Counter()
    for p, counts in sorted(by_pid.items()):
        n = sum(counts.values())
        everything.update(counts)
        print(f"pid {p} ({roles.get(p, '?')}): {n} samples, {100 * n / total:.1f}% of all")
        for name, v in counts.most_common():
            print(f"  {100 * v / n:5.1f}%  {name}")
    print(f"all processes: {total} samples")
    for name, v in everything.most_common():
        print(f"  {100 * v / total:5.1f}%  {name}")
    print("largest leaf symbols in 'other':")
    for sym, v in other_leaf.most_common(8):
        print(f"  {100 * v / total:5.1f}%  {sym[:100]}")


if __name__ == "__main__":
    main()
