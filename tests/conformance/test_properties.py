"""Differential property tests: random inputs, good and bad, against a reference.

BlockPool runs random operation sequences beside a pure-Python model of the contract; after
every step the results, the exception types, num_free, refcounts() and stats must agree exactly.
The kernels run random arrays (dtypes, shapes including empty, strides including negative and
transposed, read-only, byte-swapped, int64 values beyond 2**31) against numpy references.
"""

import numpy as np
from common import rmsnorm_reference, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from reference_model import ModelPool

# Derandomised and without an example database: CI runs the same examples every time.
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ints = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**40, 2**63, -(2**70)]),
)
bad_values = st.sampled_from(["3", 1.5, None, True, [1]])
arg = st.one_of(ints, ints, ints, bad_values)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("allocate"), arg),
        st.tuples(st.just("allocate_many"), st.lists(st.one_of(ints, bad_values), max_size=4)),
        st.tuples(st.just("retain"), arg),
        st.tuples(st.just("release"), arg),
        st.tuples(st.just("release"), st.integers(0, 9)),
        st.tuples(st.just("refcount"), arg),
    ),
    max_size=40,
)


def call(obj, name, value):
    try:
        return ("ok", getattr(obj, name)(value))
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return ("raised", type(e))


def observe_model(model):
    return (
        model.num_free,
        list(model.refs),
        model.allocated_total,
        model.released_total,
        model.peak_in_use,
    )


@PROPERTY
@given(num_blocks=st.integers(0, 10), ops=operations)
def test_pool_matches_reference_model(kv, adapter, num_blocks, ops):
    pool, model = kv.BlockPool(num_blocks), ModelPool(num_blocks)
    for name, value in ops:
        got, want = call(pool, name, value), call(model, name, value)
        assert got == want, (name, value)
        assert snapshot(pool, adapter) == observe_model(model), (name, value)


# Pool sizes: small valid ones and invalid big ones (2**31 - 1 is valid but would allocate GBs).
too_big = st.sampled_from([2**31, -(2**31) - 1, 2**40, 2**63, -(2**70)])
sizes = st.one_of(st.integers(-3, 12), too_big)


@PROPERTY
@given(num_blocks=st.one_of(sizes, bad_values))
def test_pool_construction_matches_reference_model(kv, num_blocks):
    def build(cls):
        try:
            return ("ok", cls(num_blocks).num_blocks)
        except Exception as e:  # noqa: BLE001
            return ("raised", type(e))

    assert build(kv.BlockPool) == build(ModelPool)


# --- token kernels ------------------------------------------------------------------------------

INT_DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", ">i4", ">i8"]


@st.composite
def token_arrays(draw, min_size=0):
    dtype = np.dtype(draw(st.sampled_from(INT_DTYPES)))
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
    elements = st.integers(lo, hi) | st.sampled_from([0, 1, 2])
    values = draw(hnp.arrays(dtype, draw(st.integers(min_size, 40)), elements=elements))
    step = draw(st.sampled_from([1, 1, 2, -1, -3]))
    view = values[::step]
    if draw(st.booleans()):
        view.flags.writeable = False
    return view


@PROPERTY
@given(a=token_arrays(), data=st.data())
def test_common_prefix_matches_numpy(kv, a, data):
    b = a.copy()
    if a.size and data.draw(st.booleans()):
        cut = data.draw(st.integers(0, a.size - 1))
        b = b.astype(np.int64)
        b[cut] = int(a[cut]) + 1 if int(a[cut]) < 2**40 else 0
    b = b[: data.draw(st.integers(0, b.size))]
    n = min(a.size, b.size)
    a64, b64 = a.astype(object)[:n], b.astype(object)[:n]  # exact, whatever the dtype
    diff = [i for i in range(n) if a64[i] != b64[i]]
    want = diff[0] if diff else n
    assert kv.common_prefix(a, b) == want


@PROPERTY
@given(tokens=token_arrays(), eos=st.integers(-3, 3) | st.sampled_from([2**31, 2**40, -1]))
def test_count_eos_matches_numpy(kv, tokens, eos):
    want = sum(1 for v in tokens.astype(object) if v == eos)
    assert kv.count_eos(tokens, eos) == want


# --- rmsnorm --------------------------------------------------------------------------------------


@st.composite
def float_inputs(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=9))
    x = draw(hnp.arrays(np.float32, shape, elements=st.floats(-100, 100, width=32)))
    layouts = ["plain", "transposed", "reversed", "strided", "readonly", "byteswapped"]
    layout = draw(st.sampled_from(layouts))
    if layout == "transposed" and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    elif layout == "reversed":
        x = x[..., ::-1]
    elif layout == "strided" and x.ndim >= 1:
        x = np.repeat(x, 2, axis=-1)[..., ::2]
    elif layout == "readonly":
        x.flags.writeable = False
    elif layout == "byteswapped":
        x = x.astype(">f4")
    w = draw(hnp.arrays(np.float32, x.shape[-1], elements=st.floats(-4, 4, width=32)))
    eps = draw(st.sampled_from([0.0, 1e-6, 1e-2, 1.0]))
    return x, w, eps


@PROPERTY
@given(inputs=float_inputs())
def test_rmsnorm_matches_float64_reference(kv, adapter, inputs):
    x, w, eps = inputs
    x0 = x.copy()
    with np.errstate(divide="ignore", invalid="ignore"):  # eps=0 rows of zeros: not compared
        want = rmsnorm_reference(x, w, eps)
    got = adapter.to_numpy(kv.rmsnorm(x, w, eps))
    assert got.shape == x.shape and got.flags.c_contiguous
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, x0)  # never writes its input
