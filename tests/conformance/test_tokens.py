"""docs/contract.md, "Tokens", "Errors" and "Ownership": common_prefix and count_eos. Paired
with common_cpp/tests/test_tokens.cpp."""

import re

import numpy as np
import pytest
from common import refused

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def test_common_prefix_of_lists(kv):
    assert kv.common_prefix([1, 2, 3, 4], [1, 2, 5]) == 2
    assert kv.common_prefix([], [1]) == 0
    assert kv.common_prefix((7, 8), [7, 8, 9]) == 2


@pytest.mark.parametrize("da", [np.int32, np.int64])
@pytest.mark.parametrize("db", [np.int32, np.int64])
def test_common_prefix_of_arrays(kv, native, da, db):
    a = np.arange(5000, dtype=da)
    b = np.arange(5000, dtype=db)
    b[4097] = -1
    assert kv.common_prefix(native(a), native(b)) == 4097
    assert kv.common_prefix(native(a), native(b[:100])) == 100


def test_common_prefix_mixes_lists_and_arrays(kv, native):
    assert kv.common_prefix([0, 1, 2, 9], native(np.arange(4, dtype=np.int64))) == 3


def test_common_prefix_compares_int64_exactly(kv, native):
    big = 2**32 + 1  # equals 1 if anything truncates to 32 bits
    assert kv.common_prefix(native(np.array([big], np.int64)), native(np.array([1], np.int32))) == 0
    assert kv.common_prefix([big, 2**62], [big, 2**62]) == 2


def test_common_prefix_of_strided_arrays(kv, native):
    a = np.arange(20, dtype=np.int64)
    assert kv.common_prefix(native(a[::2]), [0, 2, 4, 5]) == 3
    assert kv.common_prefix(a[::-1], [19, 18, 0]) == 2  # negative strides (numpy input)


def test_common_prefix_of_other_integer_dtypes(kv, native):
    for dtype in (np.int8, np.uint16, np.uint32):
        assert kv.common_prefix(native(np.array([1, 2, 3], dtype)), [1, 2, 4]) == 2


def test_common_prefix_of_2d_array_is_value_error(kv, native):
    with refused(ValueError, match=r"\(2, 2\)"):
        kv.common_prefix(native(np.zeros((2, 2), np.int64)), [0])
    with refused(ValueError, match=r"\(3, 1\)"):
        kv.common_prefix([0], native(np.zeros((3, 1), np.int32)))


def test_common_prefix_of_float_array_is_type_error(kv, native):
    with refused(TypeError, match="float64"):
        kv.common_prefix(native(np.zeros(3)), [0])
    with refused(TypeError, match="float32"):
        kv.common_prefix([0], native(np.zeros(3, np.float32)))


@pytest.mark.parametrize("bad", ["ab", 1.5, None, True])
def test_common_prefix_list_element_of_wrong_type_is_type_error(kv, bad):
    with refused(TypeError, match=re.escape(repr(bad))):
        kv.common_prefix([1, bad], [1, 2])


def test_common_prefix_list_element_beyond_int64_is_overflow_error(kv):
    with refused(OverflowError, match=str(2**70)):
        kv.common_prefix([1, 2**70], [1])


def test_count_eos(kv, native):
    tokens = np.array([5, 2, 2, 7, 2], np.int64)
    assert kv.count_eos(native(tokens), 2) == 3
    assert kv.count_eos(native(tokens), 9) == 0
    assert kv.count_eos(native(tokens[:0]), 2) == 0


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_count_eos_accepts_every_integer_dtype(kv, native, dtype):
    tokens = np.array([1, 0, 1, 1, 3], dtype)
    assert kv.count_eos(native(tokens), 1) == 3


def test_count_eos_compares_int64_exactly(kv, native):
    big = 2**32 + 2
    tokens = np.array([big, 2, big, -(2**40)], np.int64)
    assert kv.count_eos(native(tokens), big) == 2
    assert kv.count_eos(native(tokens), 2) == 1
    assert kv.count_eos(native(tokens), -(2**40)) == 1
    assert kv.count_eos(native(np.array([2, 2], np.int32)), big) == 0  # never truncated


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_count_eos_counts_past_any_counter_width(kv, native, dtype):
    """Nearly every token matches, in arrays longer than two of the core's counting chunks and
    than 32 lanes of 16-bit counters could hold: a counter narrower than the chunk wraps."""
    n = 2 * ((1 << 21) + 12345)
    tokens = np.full(n, 7, dtype)
    tokens[::1009] = 8
    misses = len(range(0, n, 1009))
    assert kv.count_eos(native(tokens), 7) == n - misses
    assert kv.count_eos(native(tokens[::2]), 7) == n // 2 - len(range(0, n, 2018))
    assert kv.count_eos(tokens[::-1], 7) == n - misses  # negative strides (numpy input)


@pytest.mark.parametrize(("da", "db"), [(np.int64, np.int32), (np.int32, np.int64),
                                        (np.int64, np.int64)])  # fmt: skip
def test_common_prefix_compares_high_bits_at_every_position(kv, native, da, db):
    """int64 values that differ from the other side only above bit 31, at the first, a middle
    and the last position of arrays longer than any block the core compares at once, in both
    argument orders: compared at 32 bits, they would look equal."""
    n = 100_003
    base = np.arange(n, dtype=np.int64) * 7 - 5
    for at in (0, n // 2 + 3, n - 1):
        a, b = base.astype(da), base.astype(db)
        wide = a if da == np.int64 else b
        wide[at] += 2**32
        assert kv.common_prefix(native(a), native(b)) == at, at
        assert kv.common_prefix(native(b), native(a)) == at, at
    assert kv.common_prefix(native(base.astype(da)), native(base.astype(db))) == n


def test_count_eos_of_strided_arrays(kv, native):
    tokens = np.array([2, 9, 2, 9, 2, 9], np.int32)
    assert kv.count_eos(native(tokens[::2]), 2) == 3
    assert kv.count_eos(tokens[::-1], 9) == 3  # negative strides (numpy input)


def test_tokens_whose_stride_is_not_whole_elements_are_read_right(kv):
    """A field of packed records (a numpy view whose stride is not a whole number of elements) is
    read token by token, in either function and either argument, never at a truncated stride."""
    records = np.zeros(5, dtype=[("tag", "u1"), ("token", "=i4")])  # 5-byte records, packed
    records["token"] = [7, 1, 7, 7, 2]
    tokens = records["token"]
    assert tokens.strides[0] % tokens.itemsize  # what this test is about
    assert kv.count_eos(tokens, 7) == 3
    assert kv.common_prefix(tokens, [7, 1, 7, 0]) == 3
    assert kv.common_prefix([7, 1, 7, 7, 2, 9], tokens) == 5


def test_count_eos_of_lists(kv):
    assert kv.count_eos([1, 2, 1], 1) == 2


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_count_eos_reads_int32_and_int64_in_place(kv, native, adapter, dtype):
    tokens = native(np.arange(1000, dtype=dtype))
    assert kv._testing.data_address(tokens) == adapter.data_address(tokens)


def test_count_eos_reads_strided_views_in_place(kv, native, adapter):
    base = native(np.arange(1000, dtype=np.int64))
    view = base[10::3]
    assert kv._testing.data_address(view) == adapter.data_address(view)


def test_count_eos_converts_other_integer_dtypes(kv, native, adapter):
    tokens = native(np.arange(100, dtype=np.int16))
    assert kv._testing.data_address(tokens) != adapter.data_address(tokens)
    assert kv.count_eos(tokens, 99) == 1


def test_count_eos_of_float_array_is_type_error(kv, native):
    with refused(TypeError, match="float64"):
        kv.count_eos(native(np.array([1.0, 2.0])), 1)


def test_count_eos_of_bool_array_is_type_error(kv, native):
    # Bools are not ints (docs/contract.md, "Errors"), in an array as in a scalar.
    with refused(TypeError, match="bool"):
        kv.count_eos(native(np.ones(3, bool)), 1)


def test_count_eos_of_2d_array_is_value_error(kv, native):
    with refused(ValueError, match=r"\(2, 3\)"):
        kv.count_eos(native(np.zeros((2, 3), np.int64)), 0)


def test_count_eos_of_0d_array_is_value_error(kv, native):
    with refused(ValueError, match=r"\(\)"):
        kv.count_eos(native(np.array(3, np.int64)), 3)


def test_eos_beyond_int64_is_overflow_error(kv, native):
    tokens = native(np.array([1, 2], np.int64))
    with refused(OverflowError, match=str(2**70)):
        kv.count_eos(tokens, 2**70)
    with refused(OverflowError, match=str(-(2**64))):
        kv.count_eos(tokens, -(2**64))


@pytest.mark.parametrize("bad", ["2", 2.0, None, True])
def test_eos_of_wrong_type_is_type_error(kv, native, bad):
    with refused(TypeError, match=re.escape(repr(bad))):
        kv.count_eos(native(np.array([1, 2], np.int64)), bad)


@pytest.mark.parametrize("bad", [None, "abc", object(), 1.5])
def test_tokens_of_wrong_type_is_type_error(kv, bad):
    # The message names None; other objects are named as each package's array conversion words
    # them (numpy's or torch's), so only the type is the contract's there.
    with refused(TypeError, match="None" if bad is None else None):
        kv.count_eos(bad, 1)


def test_bare_int_tokens_is_a_0d_value_error(kv):
    # numpy.asarray(3) is a 0-d integer array: the right type, the wrong shape.
    with refused(ValueError, match=r"\(\)"):
        kv.count_eos(3, 3)


# --- in place, by the bytes the real entry points allocate -------------------------------------

MIB = 1 << 20


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_count_eos_allocates_nothing_for_in_place_dtypes(kv, native, adapter, dtype):
    # 1 M tokens: a conversion to int64 would allocate 8 MB.
    tokens = native(np.arange(1 << 20, dtype=dtype))
    kv.count_eos(tokens, 0)  # warm caches and lazy imports
    assert adapter.bytes_allocated(lambda: kv.count_eos(tokens, 0)) < MIB


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_common_prefix_allocates_nothing_for_in_place_dtypes(kv, native, adapter, dtype):
    a = native(np.arange(1 << 20, dtype=dtype))
    b = native(np.arange(1 << 20, dtype=dtype))
    kv.common_prefix(a, b)
    assert adapter.bytes_allocated(lambda: kv.common_prefix(a, b)) < MIB


def test_read_only_token_arrays_are_read_in_either_argument(kv):
    """A read-only array (a memory-mapped prompt, a shared cache) is read, never refused,
    wherever it is passed: common_prefix's first argument, its second, both, and count_eos."""
    a, b = np.array([5, 6, 7, 8], np.int64), np.array([5, 6, 0], np.int64)
    ro_a, ro_b = a.copy(), b.copy()
    ro_a.flags.writeable = ro_b.flags.writeable = False
    assert kv.common_prefix(ro_a, b) == 2
    assert kv.common_prefix(a, ro_b) == 2
    assert kv.common_prefix(ro_a, ro_b) == 2
    assert kv.count_eos(ro_b, 5) == 1


def test_count_eos_reads_uint64_in_place(kv, native, adapter):
    # uint64 is compared exactly in place: converting would wrap values above 2**63.
    tokens = np.array([2**63 + 5, 1, 2**63 + 5], dtype=np.uint64)
    assert kv._testing.data_address(native(tokens)) == tokens.__array_interface__["data"][0]
    # -(2**63) + 5 has the bits of 2**63 + 5: only a wrapping conversion would count them.
    assert kv.count_eos(native(tokens), -(2**63) + 5) == 0
    assert kv.count_eos(native(tokens), 1) == 1
    big_native = native(np.full(1 << 20, 7, dtype=np.uint64))
    kv.count_eos(big_native, 7)
    assert adapter.bytes_allocated(lambda: kv.count_eos(big_native, 7)) < MIB


@pytest.mark.parametrize("function", ["count_eos", "common_prefix"])
def test_type_is_checked_before_shape(kv, native, function):
    floats = native(np.zeros((2, 3)))  # 2-D and float: the type is the error reported
    call = {
        "count_eos": lambda: kv.count_eos(floats, 0),
        "common_prefix": lambda: kv.common_prefix(floats, floats),
    }[function]
    with refused(TypeError, match="float64"):
        call()
