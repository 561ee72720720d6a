"""Tokens: common_prefix and count_eos against numpy's idioms, the time to read their bytes
once and, at a few tokens, the technology's own call given the same kinds of argument. Paired
with tests/conformance/test_tokens.py. One thread on every side: the token kernels are
single-threaded, like numpy's idioms and the read floor here."""

from __future__ import annotations

import numpy as np

import spec
from measuring.harness import Case, Group
from spec import case_key


def numpy_common_prefix(a, b):
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def _call_floors(feature: str, n: int) -> list[Case]:
    """At a few tokens (spec.TINY_TOKENS), each installed package's technology's own call given
    the feature's kinds of argument (spec.TOKEN_FLOOR_CALLS), in the same rounds as its token
    call: the floor a call of a few tokens is judged against. One case a technology, however
    many packages share it."""
    if n not in spec.TINY_TOKENS[feature]:
        return []
    from measuring.bench_call_overhead import technology_calls

    calls, cases = technology_calls(spec.TOKEN_FLOOR_CALLS[feature][0]), {}
    for p in spec.installed():
        row = spec.REGISTRY[p]["arrays"]
        if row in calls:
            stmt, namespace = calls[row]
            key = spec.call_floor(feature, n, p)
            cases[key] = Case(key, stmt, lambda ns=namespace: ns, meta={"technology": row})
    return list(cases.values())


def _count_eos_group(n: int, quick: bool) -> Group:
    from kvbridge_probes import probe_floors

    tokens = np.arange(1, n + 1, dtype=np.int32)  # touched memory; eos=0 never matches
    cases = []
    for p in spec.installed():
        ns = {"kv": spec.module(p), "tokens": spec.native(p)(tokens)}
        cases.append(Case(case_key(f"count_eos n={n}", p), "kv.count_eos(tokens, 0)",
                          lambda ns=ns: ns, meta={"package": p, "n": n}))  # fmt: skip
    cases.append(Case(case_key(f"count_eos n={n}", "numpy"), "np.count_nonzero(tokens == 0)",
                      lambda: {"np": np, "tokens": tokens}, meta={"package": "numpy"}))  # fmt: skip
    cases.append(Case(case_key(f"count_eos n={n}", "read floor"), "read(tokens, 1)",
                      lambda: {"read": probe_floors.read, "tokens": tokens},
                      meta={"package": "read floor", "bytes": tokens.nbytes}))  # fmt: skip
    cases += _call_floors("count_eos", n)
    return Group(f"tokens: count_eos n={n}", cases, rounds=5 if quick else 11,
                 round_seconds=0.005 if quick else 0.05)  # fmt: skip


def _common_prefix_group(n: int, quick: bool) -> Group:
    from kvbridge_probes import probe_floors

    a = np.arange(n, dtype=np.int32)
    b = a.copy()
    cases = []
    for p in spec.installed():
        to = spec.native(p)
        ns = {"kv": spec.module(p), "a": to(a), "b": to(b)}
        cases.append(Case(case_key(f"common_prefix n={n}", p), "kv.common_prefix(a, b)",
                          lambda ns=ns: ns, meta={"package": p, "n": n}))  # fmt: skip
        if n <= spec.LIST_MAX:
            lists = {"kv": spec.module(p), "a": a.tolist(), "b": b.tolist()}
            cases.append(Case(case_key(f"common_prefix lists n={n}", p), "kv.common_prefix(a, b)",
                              lambda ns=lists: ns, meta={"package": p, "n": n}))  # fmt: skip
    cases.append(Case(case_key(f"common_prefix n={n}", "numpy"), "f(a, b)",
                      lambda: {"f": numpy_common_prefix, "a": a, "b": b},
                      meta={"package": "numpy"}))  # fmt: skip
    cases.append(Case(case_key(f"common_prefix n={n}", "read floor"), "read(a, 1); read(b, 1)",
                      lambda: {"read": probe_floors.read, "a": a, "b": b},
                      meta={"package": "read floor", "bytes": a.nbytes + b.nbytes}))  # fmt: skip
    cases += _call_floors("common_prefix", n)
    return Group(f"tokens: common_prefix n={n}", cases, rounds=5 if quick else 11,
                 round_seconds=0.005 if quick else 0.05)  # fmt: skip


def groups(quick: bool) -> list[Group]:
    eos = spec.quick_sizes(spec.EOS_SIZES, 1024) if quick else spec.EOS_SIZES
    prefix = spec.quick_sizes(spec.PREFIX_SIZES, 4096) if quick else spec.PREFIX_SIZES
    return [_count_eos_group(n, quick) for n in eos] + [
        _common_prefix_group(n, quick) for n in prefix
    ]
