"""The micro task's Python twin (OMB-Py: the OSU micro-benchmarks over mpi4py).

`shardbench run` execs this on every rank of a micro point whose micro.impl is mpi4py-numpy
or mpi4py-torch (workloads/micro/python_twin.h), before MPI_Init, so it is the launcher's
rank. It runs the cases the C++ side lists in --spec (sizes, buffer elements, iterations,
warm-up: one source for both) exactly as workloads/micro/collective_case.cpp and
p2p_case.cpp time them, on NumPy float32 arrays or torch float32 CPU tensors through
mpi4py's buffer calls (upper-case methods: no pickling, OMB-Py's buffer mode), checks every
received element, and hands rank 0's gathered timings to `shardbench run --measured`, which
writes the result file with the C++ task's records: the same tables, columns and bytes.

Timing (as the C++ cases):
  collectives  warm-up calls, then per timed call a barrier, MPI.Wtime around the call on
               every rank; a call's time is the slowest rank's (an Allreduce MAX outside the
               timed region); mean_s = the mean of those.
  p2p          warm-up iterations, one barrier, then back-to-back timed iterations (the ping-
               pong synchronises its pair); mean_s = the largest rank's mean iteration.
"""
import argparse
import datetime
import json
import mmap
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile

import numpy as np
from mpi4py import MPI

TAG_DATA, TAG_ACK = 1, 2


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# Buffers of 1 MiB and more are placed as the C++ process's allocator places them
# (workloads/models/cpu_allocator.cpp): their own mapping, 2 MiB aligned, madvise'd for huge
# pages. Without it the twins compared page sizes, not languages: NumPy's own 4 MiB arrays
# are malloc'd unaligned (at most one transparent huge page), and Open MPI's single-copy
# transfers walk their pages; a 4 MiB Allreduce took 340-520 us from Python against 205-216
# from C++, and the same from both once the buffers were placed alike.
BIG, HUGE = 1 << 20, 2 << 20


def placed(nbytes):
    """A zeroed, 2 MiB-aligned uint8 NumPy array of nbytes in its own anonymous mapping."""
    m = mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    at = (-np.frombuffer(m, np.uint8, count=1).ctypes.data) % HUGE
    if hasattr(m, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE, at - at % mmap.PAGESIZE, nbytes + at % mmap.PAGESIZE)
    _MAPS.append(m)  # kept for the process's life: the arrays view it
    return np.frombuffer(m, np.uint8, count=nbytes, offset=at)


_MAPS = []


class Buffers:
    """float32 (collectives) or uint8 (p2p) buffers of the chosen library; .np(b) is the
    NumPy view mpi4py sends from (a torch CPU tensor's .numpy() shares its memory)."""

    def __init__(self, impl):
        self.torch = impl == "mpi4py-torch"
        if self.torch:
            import torch
            self.lib = torch

    def zeros(self, n, dtype):
        size = np.dtype(dtype).itemsize * n
        a = placed(size).view(dtype) if size >= BIG else np.zeros(n, dtype=dtype)
        return self.lib.from_numpy(a) if self.torch else a

    @staticmethod
    def np(b):
        return b if isinstance(b, np.ndarray) else b.numpy()


def values(q, count, salt):
    """collective_case.cpp's rank-q input: small integers, exact in fp32 sums."""
    i = np.arange(count, dtype=np.int64)
    return ((i * 7 + q * 13 + salt) % 31 - 15).astype(np.float32)


def pattern(q, n):
    """p2p_case.cpp's rank-q byte pattern."""
    return ((np.arange(n, dtype=np.int64) * 7 + q * 13 + 1) % 251).astype(np.uint8)


class Collective:
    def __init__(self, comm, op, count, bufs):
        self.comm, self.op, self.count = comm, op, count
        self.rank, self.n = comm.Get_rank(), comm.Get_size()
        s = count // self.n
        self.s = s
        shapes = {"all_gather": (s, count), "reduce_scatter": (count, s), "all_to_all": (count, count)}
        i, o = shapes.get(op, (count, 0))
        self.inp = bufs.zeros(i, "f4")
        self.out = bufs.zeros(o, "f4") if o else None
        self.i, self.o = Buffers.np(self.inp), (Buffers.np(self.out) if o else None)
        self.fill(0)

    def fill(self, salt):
        self.i[:] = values(self.rank, self.s if self.op == "all_gather" else self.count, salt)

    def run(self):
        c, op = self.comm, self.op
        if op == "all_gather":
            c.Allgather(self.i, self.o)
        elif op == "reduce_scatter":
            c.Reduce_scatter_block(self.i, self.o, op=MPI.SUM)
        elif op == "all_reduce":
            c.Allreduce(MPI.IN_PLACE, self.i, op=MPI.SUM)
        elif op == "broadcast":
            c.Bcast(self.i, root=0)
        elif op == "all_to_all":
            c.Alltoall(self.i, self.o)
        else:
            raise SystemExit(f"omb_py: unknown collective {op!r}")

    def check(self):
        salt = 5
        self.fill(salt)
        self.run()
        n, r, s, cnt = self.n, self.rank, self.s, self.count
        if self.op == "all_gather":
            want, got = np.concatenate([values(q, s, salt) for q in range(n)]), self.o
        elif self.op == "reduce_scatter":
            want, got = sum(values(q, cnt, salt) for q in range(n))[r * s:(r + 1) * s], self.o
        elif self.op == "all_reduce":
            want, got = sum(values(q, cnt, salt) for q in range(n)), self.i
        elif self.op == "broadcast":
            want, got = values(0, cnt, salt), self.i
        else:  # all_to_all: block q of the result is rank q's block r
            want, got = np.concatenate([values(q, cnt, salt)[r * s:(r + 1) * s] for q in range(n)]), self.o
        return int((got != want).sum())


class P2P:
    def __init__(self, comm, bench, nbytes, window, bufs):
        self.comm, self.bench, self.nbytes, self.window = comm, bench, nbytes, window
        self.rank = comm.Get_rank()
        self.peer, self.lead = self.rank ^ 1, self.rank % 2 == 0
        slots = 1 if bench == "p2p_latency" else window
        self.send_b = bufs.zeros(nbytes, "u1")
        self.recv_b = bufs.zeros(slots * nbytes, "u1")
        self.send = Buffers.np(self.send_b)
        self.recv = Buffers.np(self.recv_b).reshape(slots, nbytes)
        self.ack_out, self.ack_in = np.zeros(4, np.uint8), np.zeros(4, np.uint8)

    def run(self):
        c, p = self.comm, self.peer
        if self.bench == "p2p_latency":
            if self.lead:
                c.Send(self.send, dest=p, tag=TAG_DATA)
                c.Recv(self.recv[0], source=p, tag=TAG_DATA)
            else:
                c.Recv(self.recv[0], source=p, tag=TAG_DATA)
                c.Send(self.send, dest=p, tag=TAG_DATA)
            return
        both = self.bench == "p2p_bibw"
        send, recv = (True, True) if both else (self.lead, not self.lead)
        reqs = [c.Irecv(self.recv[i], source=p, tag=TAG_DATA) for i in range(self.window) if recv]
        reqs += [c.Isend(self.send, dest=p, tag=TAG_DATA) for _ in range(self.window) if send]
        MPI.Request.Waitall(reqs)
        acks = []
        if not send or recv:  # the receiver of a window acks it
            acks.append(c.Isend(self.ack_out, dest=p, tag=TAG_ACK))
        if send:
            acks.append(c.Irecv(self.ack_in, source=p, tag=TAG_ACK))
        MPI.Request.Waitall(acks)

    def check(self):
        self.send[:] = pattern(self.rank, self.nbytes)
        self.recv[:] = 0
        self.comm.Barrier()
        self.run()
        if self.bench == "p2p_bw" and self.lead:
            return 0  # the even rank only sends
        return int((self.recv != pattern(self.peer, self.nbytes)).sum())


def time_collective(c, comm, warmup, iters):
    for _ in range(warmup):
        c.run()
    local, start, slowest = [], [], []
    for _ in range(iters):
        comm.Barrier()
        t0 = MPI.Wtime()
        c.run()
        dt = MPI.Wtime() - t0
        local.append(dt)
        start.append(t0)
        slowest.append(comm.allreduce(dt, op=MPI.MAX))  # outside the timed call
    return sum(slowest) / iters, local, start


def time_p2p(c, comm, warmup, iters):
    for _ in range(warmup):
        c.run()
    local, start = [], []
    comm.Barrier()
    for _ in range(iters):
        t0 = MPI.Wtime()
        c.run()
        local.append(MPI.Wtime() - t0)
        start.append(t0)
    return comm.allreduce(sum(local) / iters, op=MPI.MAX), local, start


def main(argv=None):
    ap = argparse.ArgumentParser(prog="omb_py")
    for k in ("suite", "point", "results", "shardbench", "spec", "machine"):
        ap.add_argument(f"--{k}", required=True)
    a = ap.parse_args(argv)
    spec = json.loads(a.spec)
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    origin, start_iso = MPI.Wtime(), now_iso()
    bufs = Buffers(spec["impl"])
    cases, status, reason = [], "done", ""
    if n != spec["world"]:
        status = "failed"
        reason = f"point {a.point} needs world={spec['world']} ranks but was started on {n}"
    for case in spec["cases"] if status == "done" else []:
        if spec["p2p"]:
            c = P2P(comm, spec["op"], case["count"], spec["window"], bufs)
            mean, local, start = time_p2p(c, comm, spec["warmup"], case["iters"])
        else:
            c = Collective(comm, spec["op"], case["count"], bufs)
            mean, local, start = time_collective(c, comm, spec["warmup"], case["iters"])
        wrong = comm.allreduce(c.check(), op=MPI.SUM)
        mine = sum(local) / len(local)
        row = {"mean_s": mean, "rank_min_s": comm.allreduce(mine, op=MPI.MIN),
               "rank_max_s": comm.allreduce(mine, op=MPI.MAX), "wrong": wrong,
               "local_s": comm.gather(local, root=0), "start_s": comm.gather([s - origin for s in start], root=0)}
        cases.append(row)
        del c
    hosts = comm.gather(socket.gethostname(), root=0)
    machine = comm.gather(a.machine, root=0)
    # ru_maxrss is in KiB on Linux.
    rss = comm.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, root=0)
    elapsed = MPI.Wtime() - origin
    texts = {"python_version": platform.python_version(), "mpi4py_version": __import__("mpi4py").__version__,
             "numpy_version": np.__version__, "mpi_library": MPI.Get_library_version().splitlines()[0]}
    if bufs.torch:
        texts["torch_version"] = bufs.lib.__version__
    MPI.Finalize()
    if rank != 0:
        return 0
    out = {"point_id": spec["point_id"], "world": n, "hosts": hosts, "machine_start": machine,
           "start_time": start_iso, "end_time": now_iso(), "elapsed_s": elapsed,
           "command_line": " ".join([sys.executable] + sys.argv), "status": status,
           "failure_reason": reason, "texts": texts, "cases": cases, "peak_rss_bytes": rss}
    os.makedirs(a.results, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=f".omb_py-{spec['point_id']}-", suffix=".json", dir=a.results)
    with os.fdopen(fd, "w") as f:
        json.dump(out, f)
    try:
        return subprocess.run([a.shardbench, "run", a.suite, "--point", a.point, "--results", a.results,
                               "--measured", path]).returncode
    finally:
        os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())
