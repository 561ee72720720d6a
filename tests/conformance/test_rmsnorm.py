"""docs/contract.md, "RMSNorm" and "Errors": rmsnorm. Paired with
common_cpp/tests/test_rmsnorm.cpp."""

import numpy as np
import pytest
from common import rand, refused
from common import rmsnorm_reference as reference


@pytest.mark.parametrize("shape", [(7,), (3, 5), (4, 7, 4096), (2, 3, 4, 9), (600, 1024), (1, 1)])
def test_matches_float64_reference(kv, native, adapter, shape):
    x, w = rand(*shape), rand(shape[-1], seed=1)
    y = kv.rmsnorm(native(x), native(w))
    assert isinstance(y, adapter.native_type)
    y = adapter.to_numpy(y)
    assert y.shape == shape and y.dtype == np.float32 and y.flags.c_contiguous
    np.testing.assert_allclose(y, reference(x, w), rtol=1e-5, atol=1e-5)


def test_eps_is_used(kv, native, adapter):
    x, w = np.full((1, 4), 1e-3, np.float32), np.ones(4, np.float32)
    for eps in (0.0, 1e-6, 0.5, 3):
        y = adapter.to_numpy(kv.rmsnorm(native(x), native(w), eps))
        np.testing.assert_allclose(y, reference(x, w, eps), rtol=1e-5, atol=1e-5)
    y = adapter.to_numpy(kv.rmsnorm(native(x), native(w), eps=0.5))
    np.testing.assert_allclose(y, reference(x, w, 0.5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(0,), (0, 8), (3, 0), (2, 0, 4)])
def test_empty_input(kv, native, adapter, shape):
    y = kv.rmsnorm(native(np.zeros(shape, np.float32)), native(np.ones(shape[-1], np.float32)))
    assert adapter.to_numpy(y).shape == shape


def test_transposed_input(kv, native, adapter):
    base, w = rand(64, 48), rand(64, seed=1)
    x = native(base).transpose(1, 0)
    y = adapter.to_numpy(kv.rmsnorm(x, native(w)))
    np.testing.assert_allclose(y, reference(base.T, w), rtol=1e-5, atol=1e-5)


def test_negative_strides(kv, adapter):
    base, w = rand(16, 33), rand(33, seed=1)
    for x in (base[::-1], base[:, ::-1], base[::-2, ::-3]):
        wv = rand(x.shape[-1], seed=2)
        y = adapter.to_numpy(kv.rmsnorm(x, wv))  # numpy input: every package accepts it
        np.testing.assert_allclose(y, reference(x, wv), rtol=1e-5, atol=1e-5)
    reversed_weight = w[::-1].copy()[::-1]  # equals w, read through a negative stride
    y = adapter.to_numpy(kv.rmsnorm(base, reversed_weight))
    np.testing.assert_allclose(y, reference(base, w), rtol=1e-5, atol=1e-5)


def test_byte_strides_off_the_element_size(kv, adapter):
    """float32 fields of a packed record (byte strides of 5, at a 1-byte offset) are read by
    their strides, as is a length-1 dimension whose stride no float32 could have (numpy calls
    that array aligned and contiguous: its stride is never stepped along)."""
    base, w = rand(6, 24), rand(24, seed=1)
    records = np.zeros(base.shape, dtype=np.dtype([("pad", "u1"), ("f", "<f4")], align=False))
    records["f"], wide = base, np.zeros(24, dtype=records.dtype)
    wide["f"] = w
    x, wv = records["f"], wide["f"]
    assert x.strides == (120, 5) and not x.flags.aligned
    y = adapter.to_numpy(kv.rmsnorm(x, wv))  # numpy input: every package accepts it
    np.testing.assert_allclose(y, reference(base, w), rtol=1e-5, atol=1e-5)
    row = np.lib.stride_tricks.as_strided(base[2:], shape=(1, 24), strides=(3, 4))
    assert row.flags.aligned and row.flags.c_contiguous
    y = adapter.to_numpy(kv.rmsnorm(row, w))
    np.testing.assert_allclose(y, reference(base[2:3], w), rtol=1e-5, atol=1e-5)


def test_strided_weight(kv, native, adapter):
    x, wide = rand(5, 10), rand(20, seed=1)
    y = adapter.to_numpy(kv.rmsnorm(native(x), native(wide)[::2]))
    np.testing.assert_allclose(y, reference(x, wide[::2]), rtol=1e-5, atol=1e-5)


def test_never_writes_inputs(kv, native):
    x, w = rand(8, 16), rand(16, seed=1)
    x0, w0 = x.copy(), w.copy()
    kv.rmsnorm(native(x), native(w))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(w, w0)


def test_read_only_inputs(kv, adapter):
    x, w = rand(4, 8), rand(8, seed=1)
    x.flags.writeable = False
    w.flags.writeable = False
    y = adapter.to_numpy(kv.rmsnorm(x, w))
    np.testing.assert_allclose(y, reference(x, w), rtol=1e-5, atol=1e-5)


# The large shape's output (8.6 MB) is past the size from which the core writes an existing out=
# with non-temporal stores, a path of its own.
@pytest.mark.parametrize("shape", [(4, 7, 64), (2100, 1024)])
def test_out_is_written_and_returned(kv, native, adapter, shape):
    x, w = rand(*shape), rand(shape[-1], seed=1)
    out = native(np.zeros(shape, np.float32))
    assert kv.rmsnorm(native(x), native(w), 1e-6, out=out) is out
    np.testing.assert_allclose(adapter.to_numpy(out), reference(x, w), rtol=1e-5, atol=1e-5)


def line_aligned(shape, fill):
    """A float32 array of `shape` whose first element starts a 64-byte cache line, on purpose:
    where numpy happens to place an array decides which of the core's streamed paths runs."""
    n = int(np.prod(shape))
    raw = np.full(n + 16, fill, np.float32)
    skip = (-raw.__array_interface__["data"][0] % 64) // 4
    return raw[skip : skip + n].reshape(shape)


def test_streamed_out_writes_every_element_of_rows_that_end_mid_line(kv, native, adapter):
    # 1000 float32 columns: every row ends in the middle of a cache line (and every other row
    # starts in one), 8.4 MB, so an existing out= is streamed; out starts on a line.
    x, w = rand(2100, 1000), rand(1000, seed=1)
    out = line_aligned(x.shape, np.nan)
    assert out.__array_interface__["data"][0] % 64 == 0
    assert kv.rmsnorm(native(x), native(w), 1e-6, out=native(out)) is not None
    want = adapter.to_numpy(kv.rmsnorm(native(x), native(w), 1e-6))
    np.testing.assert_array_equal(out, want)  # bit for bit, and no element left NaN


def test_out_allocates_nothing(kv, native, adapter):
    x, w = native(rand(256, 1024)), native(rand(1024, seed=1))
    out = native(np.zeros((256, 1024), np.float32))
    kv.rmsnorm(x, w, out=out)  # warm-up: first calls may cache dispatch state
    without_out = adapter.bytes_allocated(lambda: kv.rmsnorm(x, w))
    with_out = adapter.bytes_allocated(lambda: kv.rmsnorm(x, w, out=out))
    assert without_out >= 256 * 1024 * 4  # the measurement sees a fresh output...
    assert with_out < 4096  # ...and with out= there is none (small bookkeeping at most)


def test_out_of_wrong_shape_is_value_error(kv, native):
    x, w = native(rand(4, 8)), native(rand(8))
    with refused(ValueError, match=r"\(8, 4\)"):
        kv.rmsnorm(x, w, out=native(np.zeros((8, 4), np.float32)))


def test_out_of_wrong_dtype_is_type_error(kv, native):
    x, w = native(rand(4, 8)), native(rand(8))
    with refused(TypeError, match="float64"):
        kv.rmsnorm(x, w, out=native(np.zeros((4, 8), np.float64)))


def test_out_overlapping_an_input_is_value_error(kv, native, adapter):
    x, w = rand(4, 8), rand(8)
    xn = native(x)
    with refused(ValueError, match="overlap"):
        kv.rmsnorm(xn, native(w), out=xn)
    np.testing.assert_array_equal(adapter.to_numpy(xn), x)


def test_out_overlapping_weight_is_value_error(kv, native, adapter):
    buffer = native(np.ones(6, np.float32))
    with refused(ValueError, match="overlap"):
        kv.rmsnorm(native(np.ones((2, 3), np.float32)), buffer[:3], out=buffer.reshape(2, 3))
    np.testing.assert_array_equal(adapter.to_numpy(buffer), np.ones(6, np.float32))


def test_out_of_wrong_type_is_type_error(kv, native):
    with refused(TypeError, match="list"):
        kv.rmsnorm(native(rand(3)), native(rand(3)), out=[0.0] * 3)


def test_read_only_out_is_refused_and_left_unchanged(kv, native, adapter):
    """A read-only out= is never written: a numpy package refuses it as any out= it cannot
    write in place (ValueError); the torch package takes only a torch.Tensor for out= (tensors
    have no read-only flag), so a numpy array there is the TypeError of a wrong type. Both small
    and large: a large out= takes the streamed stores."""
    for rows in (4, 2100):
        x, w = native(rand(rows, 1024)), native(rand(1024))
        out = np.full((rows, 1024), 7.0, np.float32)
        out.flags.writeable = False
        numpy_out = adapter.native_type is np.ndarray
        with refused(ValueError if numpy_out else TypeError,
                     match="writeable" if numpy_out else "torch.Tensor"):  # fmt: skip
            kv.rmsnorm(x, w, out=out)
        assert (out == 7.0).all()


def test_non_contiguous_out_is_value_error(kv, native):
    x, w = native(rand(4, 8)), native(rand(8))
    with refused(ValueError, match="contiguous"):
        kv.rmsnorm(x, w, out=native(np.zeros((8, 4), np.float32)).transpose(1, 0))


def test_weight_of_wrong_length_is_value_error(kv, native):
    with refused(ValueError, match="length 7"):
        kv.rmsnorm(native(rand(4, 8)), native(rand(7)))


def test_weight_not_1d_is_value_error(kv, native):
    with refused(ValueError, match=r"\(1, 8\)"):
        kv.rmsnorm(native(rand(4, 8)), native(rand(1, 8)))


def test_0d_x_is_value_error(kv, native):
    with refused(ValueError, match="0-d"):
        kv.rmsnorm(native(np.array(1.0, np.float32)), native(rand(1)))


@pytest.mark.parametrize(
    ("eps", "named"),
    [(-1.0, "-1"), (-1e-9, "-1e-09"), (float("nan"), "nan"), (float("inf"), "inf")],
)
def test_bad_eps_is_value_error(kv, native, eps, named):
    with refused(ValueError, match=f"got {named}$"):
        kv.rmsnorm(native(rand(2, 4)), native(rand(4)), eps)


def test_float64_x_is_type_error(kv, native):
    with refused(TypeError, match="float64"):
        kv.rmsnorm(native(np.zeros((2, 4))), native(rand(4)))


def test_float64_weight_is_type_error(kv, native):
    with refused(TypeError, match="float64"):
        kv.rmsnorm(native(rand(2, 4)), native(np.ones(4)))
    with refused(TypeError, match="int32"):
        kv.rmsnorm(native(rand(2, 4)), native(np.ones(4, np.int32)))


def test_integer_x_is_type_error(kv, native):
    with refused(TypeError, match="int"):
        kv.rmsnorm(native(np.zeros((2, 4), np.int32)), native(rand(4)))


@pytest.mark.parametrize("bad", [None, "x"])
def test_x_of_wrong_type_is_type_error(kv, native, bad):
    with refused(TypeError):
        kv.rmsnorm(bad, native(rand(4)))


@pytest.mark.parametrize("bad", [None, "1e-6"])
def test_eps_of_wrong_type_is_type_error(kv, native, bad):
    with refused(TypeError):
        kv.rmsnorm(native(rand(2, 4)), native(rand(4)), bad)


@pytest.mark.parametrize(
    "bad",
    [True, False, np.True_, np.array(1e-6), np.array(1e-6, np.float32), np.array([1e-6])],
    ids=["True", "False", "numpy.True_", "0-d float64", "0-d float32", "1-element"],
)
def test_eps_of_a_bool_or_an_array_is_type_error(kv, native, bad):
    # eps is a real number: a bool is a flag, and an array (0-d too) is data, not a scalar (found
    # in review: five packages accepted True as 1.0 and one refused it).
    with refused(TypeError, match="eps must be a float"):
        kv.rmsnorm(native(rand(2, 4)), native(rand(4)), bad)


@pytest.mark.parametrize(
    ("x", "weight", "out", "named"),
    [
        ((4, 8), np.ones(7), None, "float64"),  # weight: wrong dtype and wrong length
        ((4, 8), np.ones(7, np.int32), None, "int32"),
        (np.zeros((4, 8)), rand(7), None, "float64"),  # x: wrong dtype, weight wrong length
        ((4, 8), rand(7), np.zeros((4, 8)), "float64"),  # out: wrong dtype, weight wrong length
        ((4, 8), rand(8), np.zeros((3, 8)), "float64"),  # out: wrong dtype and wrong shape
    ],
    ids=["weight", "weight-int", "x", "out", "out-shape"],
)
def test_type_is_checked_before_shape_across_rmsnorms_arrays(kv, native, x, weight, out, named):
    # The contract's precedence holds across the call's three arrays: the TypeError of any of
    # them wins over the ValueError of another's shape (found in review: three packages compared
    # weight's length before looking at out's dtype).
    x = rand(*x) if isinstance(x, tuple) else x
    kwargs = {} if out is None else {"out": native(out)}
    with refused(TypeError, match=named):
        kv.rmsnorm(native(x), native(weight), **kwargs)


def test_rows_of_tiny_and_huge_values(kv, native, adapter):
    # Regression (found by test_properties): float32 sums of squares underflow for |x| < 1e-23
    # and overflow for |x| > 1e19, giving NaN or zeros where the float64 reference is finite.
    x = np.array([[5.9e-27, -3e-27, 1e-30], [3e30, -1e31, 2e29], [1e-45, 0, 0]], np.float32)
    w = np.array([1.0, 2.0, -0.5], np.float32)
    got = adapter.to_numpy(kv.rmsnorm(native(x), native(w), 0.0))
    np.testing.assert_allclose(got, reference(x, w, 0.0), rtol=1e-5, atol=1e-5)


def test_single_element_reversed_input(kv, adapter):
    # Regression (found by test_properties): numpy calls a one-element array contiguous whatever
    # its stride, so a "make it contiguous" step could pass a negative stride through.
    x = np.array([3.0], np.float32)[::-1]
    y = adapter.to_numpy(kv.rmsnorm(x, np.array([2.0], np.float32)[::-1], 0.0))
    np.testing.assert_allclose(y, [2.0], rtol=1e-5)


def test_byte_swapped_float32_input(kv, adapter):
    # float32 in the other byte order is still float32: converted, never refused (found in
    # review: two packages refused it while the third accepted it).
    x, w = rand(3, 8).astype(">f4"), rand(8, seed=1).astype(">f4")
    y = adapter.to_numpy(kv.rmsnorm(x, w))
    np.testing.assert_allclose(y, reference(x, w), rtol=1e-5, atol=1e-5)
