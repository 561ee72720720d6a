"""Call overhead: the cheapest pool calls beside the floors of each binding technology.
Paired with tests/conformance/test_block_pool.py."""

import pytest


def test_num_free(benchmark, kv, package):
    benchmark.group = "call overhead: num_free"
    benchmark.extra_info.update(package=package, kind="kvbridge")
    pool = kv.BlockPool(64)
    benchmark(lambda: pool.num_free)


def test_refcount(benchmark, kv, package):
    benchmark.group = "call overhead: refcount"
    benchmark.extra_info.update(package=package, kind="kvbridge")
    pool = kv.BlockPool(64)
    pool.allocate(1)
    benchmark(pool.refcount, 0)


def test_allocate_release_pair(benchmark, kv, package):
    benchmark.group = "call overhead: allocate(1) + release"
    benchmark.extra_info.update(package=package, kind="kvbridge")
    pool = kv.BlockPool(64)

    def pair():
        (b,) = pool.allocate(1)
        pool.release(b)

    benchmark(pair)


@pytest.mark.parametrize(
    "floor",
    ["pybind11 no-op", "nanobind no-op", "Cython no-op", "C-API METH_FASTCALL no-op",
     "torch.ops no-op"],
)  # fmt: skip
def test_floor_noop(benchmark, floor, request):
    benchmark.group = "call overhead: floors"
    benchmark.extra_info.update(package=floor, kind="floor")
    if floor == "torch.ops no-op":
        fn = request.getfixturevalue("torch_probes").noop.default
    else:
        from kvbridge_probes import probe_capi, probe_cython, probe_nanobind, probe_pybind

        fn = {"pybind11 no-op": probe_pybind.noop, "nanobind no-op": probe_nanobind.noop,
              "Cython no-op": probe_cython.noop,
              "C-API METH_FASTCALL no-op": probe_capi.noop}[floor]  # fmt: skip
    # Called through a lambda like every kvbridge call above, so the ratio is binding to binding.
    benchmark(lambda: fn())


def c_abi_callables():
    """The probe C library's no-op and one-int function through each way of calling a C ABI:
    ctypes with and without argtypes, cffi's ABI mode, and cffi's compiled API mode."""
    import ctypes

    from cffi import FFI
    from kvbridge_probes import c_abi_declarations, c_abi_library, probe_cffi_api

    declared = ctypes.CDLL(c_abi_library())
    declared.kvbp_take_int64.argtypes = [ctypes.c_int64]
    declared.kvbp_take_int64.restype = ctypes.c_int64
    declared.kvbp_noop.argtypes, declared.kvbp_noop.restype = [], None
    undeclared = ctypes.CDLL(c_abi_library())  # a second handle: its functions carry no argtypes
    ffi = FFI()
    ffi.cdef(c_abi_declarations())
    abi = ffi.dlopen(c_abi_library())
    return {
        "ctypes": declared,
        "ctypes (no argtypes)": undeclared,
        "cffi ABI": abi,
        "cffi API": probe_cffi_api.lib,
    }


@pytest.mark.parametrize("technology", ["ctypes", "ctypes (no argtypes)", "cffi ABI", "cffi API"])
@pytest.mark.parametrize("call", ["no-op", "one int"])
def test_floor_c_abi(benchmark, technology, call):
    lib = c_abi_callables()[technology]
    benchmark.group = "call overhead: floors" if call == "no-op" else "call overhead: one int"
    benchmark.extra_info.update(package=f"{technology} {call}", kind="floor")
    if call == "no-op":
        fn = lib.kvbp_noop
        benchmark(lambda: fn())
    else:
        fn = lib.kvbp_take_int64
        benchmark(lambda: fn(1))


@pytest.mark.parametrize(
    "floor", ["pybind11 no-op method", "nanobind no-op method", "Cython no-op method"]
)
def test_floor_noop_method(benchmark, floor):
    """A method must load `self` (an instance check), which a free no-op does not."""
    from kvbridge_probes import probe_cython, probe_nanobind, probe_pybind

    benchmark.group = "call overhead: floors"
    benchmark.extra_info.update(package=floor, kind="floor")
    module = {"pybind11": probe_pybind, "nanobind": probe_nanobind, "Cython": probe_cython}
    owner = module[floor.split()[0]].Owner()
    benchmark(lambda: owner.noop())


def test_raw_torch_num_free(benchmark):
    """The custom-class call under kvbridge_torch's num_free property."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("kvbridge_torch")
    benchmark.group = "call overhead: num_free"
    benchmark.extra_info.update(package="torch (raw custom-class call)", kind="floor")
    pool = torch.ops.kvbridge.pool_create(64)
    benchmark(lambda: pool.num_free())
