"""Threads: two long count_eos calls from two Python threads against the same two calls on one.
The GIL must be released for the two-thread round to take less time; kvbridge runs each call
on one thread here, so the only parallelism is the caller's. Paired with
tests/conformance/test_threads.py."""

from __future__ import annotations

import threading

import numpy as np

import spec
from measuring.harness import Case, Group
from spec import case_key


def _pair(call, *args):
    """`call(*args)` on a second Python thread and on this one at the same time."""

    def run():
        t = threading.Thread(target=call, args=args)
        t.start()
        call(*args)
        t.join()

    return run


def groups(quick: bool) -> list[Group]:
    from kvbridge_probes import probe_floors

    tokens = np.ones(spec.GIL_TOKENS // (64 if quick else 1), np.int32)
    # What the machine itself gives for the same access pattern: the whole buffer read twice on
    # one thread, then once on each of two threads at the same time (both read the same bytes,
    # as the two count_eos calls do, so the second reader finds lines the first fetched). It runs
    # in every package's group, in the same rounds: how much a second core gives moves over
    # minutes on a shared machine, and a floor measured at another time compared badly.
    floor_one = {"read": probe_floors.read, "t": tokens}
    floor_two = {"pair": _pair(probe_floors.read, tokens, 1)}
    found = []
    for p in spec.installed():
        kv, t = spec.module(p), spec.native(p)(tokens)
        one = {"kv": kv, "t": t}
        two = {"pair": _pair(kv.count_eos, t, 0)}
        prepare = spec.thread_setter(p, 1)
        meta = {"package": p, "bytes": 2 * tokens.nbytes}
        found.append(Group(f"threads: GIL, {p}", [
            Case(case_key("gil 1 thread", p), "kv.count_eos(t, 0); kv.count_eos(t, 0)",
                 lambda ns=one: ns, prepare, meta),
            Case(case_key("gil 2 threads", p), "pair()", lambda ns=two: ns, prepare, meta),
            Case(case_key("gil floor 1 thread", p), "read(t, 1); read(t, 1)", lambda: floor_one,
                 meta={"package": "floor"}),
            Case(case_key("gil floor 2 threads", p), "pair()", lambda: floor_two,
                 meta={"package": "floor"}),
        ], rounds=5 if quick else 11, round_seconds=0.005 if quick else 0.1))  # fmt: skip
    return found
