"""Ownership: zero copy. `_testing.data_address` runs count_eos's input path; if nothing is
copied, its cost does not depend on the array's size. Paired with
tests/conformance/test_ownership.py."""

from __future__ import annotations

import numpy as np

import spec
from measuring.harness import Case, Group
from spec import case_key


def groups(quick: bool) -> list[Group]:
    cases = []
    arrays = {n: np.arange(n // 8, dtype=np.int64) for n in spec.ZERO_COPY_BYTES}
    for p in spec.installed():
        for nbytes, arr in arrays.items():
            ns = {"f": spec.module(p)._testing.data_address, "a": spec.native(p)(arr)}
            cases.append(Case(case_key(f"data_address {nbytes} B", p), "f(a)", lambda ns=ns: ns,
                              meta={"package": p, "bytes": nbytes}))  # fmt: skip
    return [Group("ownership: zero copy", cases, rounds=5 if quick else 21,
                  round_seconds=0.002 if quick else 0.01)]  # fmt: skip
