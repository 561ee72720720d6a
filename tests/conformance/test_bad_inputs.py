"""The bad-input catalogue (docs/contract.md, "Errors"): each case gives the contract's exception, a
message
that names the value, and leaves the pool exactly as it was.

Where the contract is silent the packages agree on a choice, recorded in docs/contract.md:
bools are not ints; numpy integer scalars are; eps must be finite.
"""

import re

import numpy as np
import pytest
from common import snapshot

F32 = np.float32
BIG = 2**70

# (id, call, expected exception, text the message must contain or None when Python, not kvbridge,
# words it). `p` is a pool with blocks 0 and 1 allocated; `n` turns numpy data into native arrays.
CASES = [
    ("pool: str size", lambda kv, p, n: kv.BlockPool("8"), TypeError, "'8'"),
    ("pool: float size", lambda kv, p, n: kv.BlockPool(8.0), TypeError, "8.0"),
    ("pool: None size", lambda kv, p, n: kv.BlockPool(None), TypeError, "None"),
    ("pool: bool size", lambda kv, p, n: kv.BlockPool(True), TypeError, "True"),
    ("pool: numpy float size", lambda kv, p, n: kv.BlockPool(np.float64(3)), TypeError, "3.0"),
    ("pool: negative size", lambda kv, p, n: kv.BlockPool(-5), ValueError, "-5"),
    ("pool: int32+1 size", lambda kv, p, n: kv.BlockPool(2**31), OverflowError, str(2**31)),
    ("pool: huge size", lambda kv, p, n: kv.BlockPool(BIG), OverflowError, str(BIG)),
    ("allocate: bool", lambda kv, p, n: p.allocate(False), TypeError, "False"),
    ("allocate: numpy bool", lambda kv, p, n: p.allocate(np.bool_(True)), TypeError, None),
    ("allocate: negative", lambda kv, p, n: p.allocate(-1), ValueError, "-1"),
    ("allocate: negative numpy", lambda kv, p, n: p.allocate(np.int8(-7)), ValueError, "-7"),
    ("allocate: huge negative", lambda kv, p, n: p.allocate(-BIG), OverflowError, str(-BIG)),
    ("allocate: list", lambda kv, p, n: p.allocate([1]), TypeError, "[1]"),
    ("allocate_many: str entry", lambda kv, p, n: p.allocate_many([1, "2"]), TypeError, "'2'"),
    ("allocate_many: bool entry", lambda kv, p, n: p.allocate_many([True]), TypeError, "True"),
    (
        "allocate_many: float array",
        lambda kv, p, n: p.allocate_many(n(np.ones(2))),
        TypeError,
        "float64",
    ),
    (
        "allocate_many: 2-D array",
        lambda kv, p, n: p.allocate_many(n(np.ones((1, 2), np.int64))),
        ValueError,
        "(1, 2)",
    ),
    (
        "allocate_many: negative",
        lambda kv, p, n: p.allocate_many(n(np.array([0, -4]))),
        ValueError,
        "-4",
    ),
    (
        "allocate_many: overflow",
        lambda kv, p, n: p.allocate_many([2**31]),
        OverflowError,
        str(2**31),
    ),
    ("allocate_many: None", lambda kv, p, n: p.allocate_many(None), TypeError, "None"),
    ("retain: free block", lambda kv, p, n: p.retain(5), RuntimeError, "5"),
    ("release: free block", lambda kv, p, n: p.release(6), RuntimeError, "6"),
    ("release: past the end", lambda kv, p, n: p.release(8), IndexError, "8"),
    ("refcount: negative", lambda kv, p, n: p.refcount(-1), IndexError, "-1"),
    ("retain: int32 overflow", lambda kv, p, n: p.retain(2**31), OverflowError, str(2**31)),
    ("release: float", lambda kv, p, n: p.release(0.0), TypeError, "0.0"),
    ("release: bool", lambda kv, p, n: p.release(True), TypeError, "True"),
    (
        "count_eos: float tokens",
        lambda kv, p, n: kv.count_eos(n(np.ones(3)), 1),
        TypeError,
        "float64",
    ),
    (
        "count_eos: bool tokens",
        lambda kv, p, n: kv.count_eos(n(np.ones(3, bool)), 1),
        TypeError,
        "bool",
    ),
    ("count_eos: 0-d tokens", lambda kv, p, n: kv.count_eos(n(np.array(1)), 1), ValueError, "()"),
    (
        "count_eos: 2-D tokens",
        lambda kv, p, n: kv.count_eos(n(np.ones((2, 2), np.int32)), 1),
        ValueError,
        "(2, 2)",
    ),
    ("count_eos: None tokens", lambda kv, p, n: kv.count_eos(None, 1), TypeError, "None"),
    ("count_eos: huge eos", lambda kv, p, n: kv.count_eos([1], BIG), OverflowError, str(BIG)),
    ("count_eos: float eos", lambda kv, p, n: kv.count_eos([1], 1.0), TypeError, "1.0"),
    ("count_eos: bool eos", lambda kv, p, n: kv.count_eos([1], True), TypeError, "True"),
    ("common_prefix: str element", lambda kv, p, n: kv.common_prefix(["a"], [1]), TypeError, "'a'"),
    (
        "common_prefix: huge element",
        lambda kv, p, n: kv.common_prefix([BIG], [1]),
        OverflowError,
        str(BIG),
    ),
    (
        "common_prefix: float array",
        lambda kv, p, n: kv.common_prefix(n(np.ones(2, F32)), [1]),
        TypeError,
        "float32",
    ),
    (
        "common_prefix: 2-D array",
        lambda kv, p, n: kv.common_prefix([1], n(np.ones((3, 1), np.int64))),
        ValueError,
        "(3, 1)",
    ),
    (
        "rmsnorm: float64 x",
        lambda kv, p, n: kv.rmsnorm(n(np.ones((2, 3))), n(np.ones(3, F32))),
        TypeError,
        "float64",
    ),
    (
        "rmsnorm: int weight",
        lambda kv, p, n: kv.rmsnorm(n(np.ones((2, 3), F32)), n(np.ones(3, np.int32))),
        TypeError,
        "int32",
    ),
    (
        "rmsnorm: 0-d x",
        lambda kv, p, n: kv.rmsnorm(n(np.array(1, F32)), n(np.ones(1, F32))),
        ValueError,
        "0-d",
    ),
    (
        "rmsnorm: short weight",
        lambda kv, p, n: kv.rmsnorm(n(np.ones((2, 3), F32)), n(np.ones(2, F32))),
        ValueError,
        "length 2",
    ),
    (
        "rmsnorm: 2-D weight",
        lambda kv, p, n: kv.rmsnorm(n(np.ones((2, 3), F32)), n(np.ones((1, 3), F32))),
        ValueError,
        "(1, 3)",
    ),
    (
        "rmsnorm: NaN eps",
        lambda kv, p, n: kv.rmsnorm(n(np.ones(3, F32)), n(np.ones(3, F32)), float("nan")),
        ValueError,
        "nan",
    ),
    (
        "rmsnorm: infinite eps",
        lambda kv, p, n: kv.rmsnorm(n(np.ones(3, F32)), n(np.ones(3, F32)), float("inf")),
        ValueError,
        "inf",
    ),
    (
        "rmsnorm: negative eps",
        lambda kv, p, n: kv.rmsnorm(n(np.ones(3, F32)), n(np.ones(3, F32)), -0.5),
        ValueError,
        "-0.5",
    ),
    (
        "rmsnorm: str eps",
        lambda kv, p, n: kv.rmsnorm(n(np.ones(3, F32)), n(np.ones(3, F32)), "0.1"),
        TypeError,
        None,
    ),
    (
        "rmsnorm: out wrong shape",
        lambda kv, p, n: kv.rmsnorm(
            n(np.ones((2, 3), F32)), n(np.ones(3, F32)), out=n(np.ones((3, 2), F32))
        ),
        ValueError,
        "(3, 2)",
    ),
    (
        "rmsnorm: out wrong dtype",
        lambda kv, p, n: kv.rmsnorm(
            n(np.ones((2, 3), F32)), n(np.ones(3, F32)), out=n(np.ones((2, 3)))
        ),
        TypeError,
        "float64",
    ),
    (
        "rmsnorm: out is a list",
        lambda kv, p, n: kv.rmsnorm(n(np.ones(3, F32)), n(np.ones(3, F32)), out=[0.0] * 3),
        TypeError,
        "list",
    ),
    ("throw: unknown kind", lambda kv, p, n: kv._testing.throw("boom"), ValueError, "'boom'"),
    ("throw: int kind", lambda kv, p, n: kv._testing.throw(3), TypeError, None),
]


def test_catalogue_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize(("case", "call", "exception", "needle"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(kv, native, adapter, case, call, exception, needle):
    pool = kv.BlockPool(8)
    pool.allocate(2)
    before = snapshot(pool, adapter)
    with pytest.raises(exception) as info:
        call(kv, pool, native)
    assert type(info.value) is exception, f"{case}: {type(info.value).__name__}: {info.value}"
    if needle is not None:
        assert re.search(re.escape(needle), str(info.value)), f"{case}: {info.value}"
    assert snapshot(pool, adapter) == before, case


def test_out_overlapping_weight_is_value_error(kv, native, adapter):
    buffer = native(np.ones(6, F32))
    with pytest.raises(ValueError, match="overlap"):
        kv.rmsnorm(native(np.ones((2, 3), F32)), buffer[:3], out=buffer.reshape(2, 3))
    np.testing.assert_array_equal(adapter.to_numpy(buffer), np.ones(6, F32))
