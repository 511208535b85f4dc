"""Columnar record of every run attempt and the resources it held (feeds the timeline and the metrics).

Invariants: interval k is (job[k], att[k], start[k], end[k], how[k], useful[k], seq[k]) with start <= end,
0 <= useful <= end - start (the checkpointed part of a requeued attempt, all of a finished one) and how one of
``HOWS`` and seq the attempt's start sequence number; its allocation rows are the rows r with ``a_iv[r] == k`` (node index and integer units as in
``pool``); rows of one interval are contiguous and in allocation order; intervals are appended in the
order attempts end (deterministic), and ``arrays()`` returns numpy copies.
"""
from __future__ import annotations

import numpy as np

HOWS = ("end", "preempt", "drain", "fail")
HOW_CODE = {h: k for k, h in enumerate(HOWS)}


class Intervals:
    def __init__(self):
        self.job, self.att, self.start, self.end, self.how, self.useful, self.seq = [], [], [], [], [], [], []
        self.a_iv, self.a_node, self.a_g, self.a_c, self.a_m = [], [], [], [], []

    def __len__(self):
        return len(self.job)

    def set_single_attempts(self, start, end, seq, size, use_c: bool):
        """Every job ran once, from ``start[j]`` to ``end[j]`` on ``size[j]`` processors (CPUs if ``use_c``, else
        GPUs) of processor-count node 0: the record as columns, in the order the event loop would append them
        (by end, then start sequence). Returns the start and end arrays (float seconds, by job)."""
        n = len(start)
        start_s = np.asarray(start, dtype=np.float64)
        end_s = np.asarray(end, dtype=np.float64)
        sq = np.asarray(seq, dtype=np.int64)
        order = np.lexsort((sq, end_s))
        sizes = np.asarray(size, dtype=np.int64)[order]
        zeros = np.zeros(n, dtype=np.int64)
        self.job, self.att, self.start, self.end = order, zeros, start_s[order], end_s[order]
        self.how, self.useful, self.seq = np.zeros(n, dtype=np.int8), end_s[order] - start_s[order], sq[order]
        self.a_iv, self.a_node, self.a_m = np.arange(n, dtype=np.int64), zeros, zeros
        self.a_g, self.a_c = (zeros, sizes) if use_c else (sizes, zeros)
        return start_s, end_s

    def add(self, j, att, s, e, alloc, how, useful=None, seq=None) -> None:
        """``useful``: seconds of the attempt that count as done work (all of it unless requeued)."""
        k = len(self.job)
        self.job.append(j)
        self.att.append(att)
        self.start.append(s)
        self.end.append(e)
        self.how.append(HOW_CODE[how])
        self.useful.append(e - s if useful is None else useful)
        self.seq.append(-1 if seq is None else seq)
        for n, g, c, m in alloc:
            self.a_iv.append(k)
            self.a_node.append(n)
            self.a_g.append(g)
            self.a_c.append(c)
            self.a_m.append(m)

    def arrays(self) -> dict:
        return {
            "job": np.asarray(self.job, dtype=np.int64), "att": np.asarray(self.att, dtype=np.int64),
            "start": np.asarray(self.start, dtype=np.float64), "end": np.asarray(self.end, dtype=np.float64),
            "how": np.asarray(self.how, dtype=np.int8), "useful": np.asarray(self.useful, dtype=np.float64),
            "seq": np.asarray(self.seq, dtype=np.int64),
            "a_iv": np.asarray(self.a_iv, dtype=np.int64), "a_node": np.asarray(self.a_node, dtype=np.int64),
            "a_g": np.asarray(self.a_g, dtype=np.int64), "a_c": np.asarray(self.a_c, dtype=np.int64),
            "a_m": np.asarray(self.a_m, dtype=np.int64),
        }
