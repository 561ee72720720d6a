"""What kvbridge-torch-stable adds to the torch tests (packages/torch_stable/contract.md): pools
as handles the library owns, the torch range its import accepts, and a library that calls torch
only through the stable ABI."""

import gc
import re
import subprocess
import sys
import threading
from pathlib import Path

import kvbridge_torch_stable as kv
import pytest
import torch

# The library's ops as the front end calls them: their exceptions typed by its one error path
# (torch 2.15 would raise every one as RuntimeError otherwise: csrc/ops.cpp, KVB_BOX).
OPS = kv._testing.TYPED_OPS
LIBRARY = Path(kv.__file__).with_name("libkvbridge_torch_stable.so")


def refused_handle(handle):
    return pytest.raises(ValueError, match=rf"^pool={handle} is not a live BlockPool handle")


def test_a_pool_is_a_handle_the_library_owns_freed_exactly_once():
    before = kv.live_pools()
    handle = OPS.pool_create(4)
    assert type(handle) is int and kv.live_pools() == before + 1
    assert OPS.pool_allocate(handle, 2) == [0, 1]
    OPS.pool_destroy(handle)
    assert kv.live_pools() == before
    with refused_handle(handle):  # a second free: refused, nothing freed twice
        OPS.pool_destroy(handle)
    assert kv.live_pools() == before


@pytest.mark.parametrize("handle", [0, -1, 2**62])
def test_an_unknown_handle_is_a_value_error_for_every_pool_op(handle):
    calls = {
        "pool_destroy": (), "pool_num_blocks": (), "pool_num_free": (), "pool_allocate": (1,),
        "pool_retain": (0,), "pool_release": (0,), "pool_refcount": (0,), "pool_refcounts": (),
        "pool_stats": (), "pool_repr": (), "pool_stats_repr": (),
        "pool_allocate_many": (torch.tensor([1]),),
    }  # fmt: skip
    for name, args in calls.items():
        with refused_handle(handle):
            getattr(OPS, name)(handle, *args)


def test_a_freed_handle_is_never_handed_out_again():
    freed = OPS.pool_create(1)
    OPS.pool_destroy(freed)
    fresh = [OPS.pool_create(1) for _ in range(50)]
    try:
        assert freed not in fresh
        with refused_handle(freed):
            OPS.pool_num_free(freed)
    finally:
        for h in fresh:
            OPS.pool_destroy(h)


def test_the_python_pool_frees_its_handle_when_it_goes():
    pool = kv.BlockPool(3)
    handle = pool._handle
    stats = pool.stats
    del pool
    gc.collect()
    assert stats.allocated_total == 0  # the view keeps the pool, and its handle, alive
    del stats
    gc.collect()
    with refused_handle(handle):
        OPS.pool_num_free(handle)


def test_a_pool_freed_while_other_threads_call_it_is_an_error_never_a_crash():
    handle = OPS.pool_create(64)
    barrier, outcomes = threading.Barrier(3), []

    def caller():
        barrier.wait()
        for _ in range(2000):
            try:
                OPS.pool_allocate(handle, 1)
                OPS.pool_num_free(handle)
            except ValueError as e:
                outcomes.append(str(e))
                return
        outcomes.append("done")

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for t in threads:
        t.start()
    barrier.wait()
    OPS.pool_destroy(handle)
    for t in threads:
        t.join()
    assert len(outcomes) == 2
    assert all(o == "done" or o.startswith(f"pool={handle} is not") for o in outcomes)


def test_pools_created_and_freed_from_many_threads_each_keep_their_own_handle():
    """4 threads create, use and free pools at once: the handle table is the one thing they
    share, and on a free-threaded Python (py313t-torch_stable) these calls race in it. Only its
    lock keeps every handle unique and each one naming its own pool; without it handles repeat
    (a pool answers with another's size, or is freed twice) or the table breaks."""
    n_threads, rounds = 4, 3000
    before, errors = kv.live_pools(), []
    barrier = threading.Barrier(n_threads)

    def worker(i):
        try:
            barrier.wait(timeout=60)
            for r in range(rounds):
                blocks = 1 + (i * rounds + r) % 13
                handle = OPS.pool_create(blocks)
                OPS.pool_allocate(handle, 1)
                got = (OPS.pool_num_blocks(handle), OPS.pool_num_free(handle))
                if got != (blocks, blocks - 1):
                    errors.append(f"pool {handle} made with {blocks} blocks answered {got}")
                OPS.pool_destroy(handle)
        except Exception as e:  # noqa: BLE001 - any error here is the finding
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors[:3]
    assert kv.live_pools() == before


def test_import_refuses_an_older_torch_naming_both_versions():
    # Simulated in a fresh interpreter: torch reports an older version before the import.
    code = "import torch; torch.__version__ = '2.10.0'; import kvbridge_torch_stable"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode != 0 and "ImportError" in done.stderr
    assert "torch >= 2.11" in done.stderr and "torch 2.10.0 is installed" in done.stderr


def test_import_accepts_its_own_target_and_later_versions():
    """Its stable-ABI target itself (the declared minimum, torch>=2.11 on the wheel) and a later
    local build both import: the check refuses only what is older (simulated as above)."""
    from kvbridge_torch_stable._build_info import TORCH_TARGET

    for reported in (f"{TORCH_TARGET}.0", f"{TORCH_TARGET}.0+cu126", "2.99.0"):
        code = f"import torch; torch.__version__ = {reported!r}; import kvbridge_torch_stable"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=False)  # fmt: skip
        assert done.returncode == 0, (reported, done.stderr[-2000:])


def test_the_torch_range_is_stated_once_in_three_places():
    """CMakeLists.txt's target, the wheel's torch>= and the import's check say the same."""
    from kvbridge_torch_stable._build_info import TORCH_TARGET

    root = Path(__file__).resolve().parents[1]
    cmake = re.search(
        r'set\(KVBRIDGE_TORCH_TARGET "([\d.]+)"\)', (root / "CMakeLists.txt").read_text()
    )
    assert cmake and cmake.group(1) == TORCH_TARGET
    from importlib.metadata import requires

    assert f"torch>={TORCH_TARGET}" in requires("kvbridge-torch-stable")


def test_the_library_calls_torch_through_the_stable_abi_only():
    """No C++ symbol of c10, ATen or torch's C++ API is undefined in the library (those change
    between releases); it needs only the stable ABI's C shims, from libtorch_cpu, and no Python."""
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(LIBRARY)], capture_output=True,
                               text=True, check=True).stdout  # fmt: skip
    cxx_torch = [s for s in undefined.split() if re.match(r"_ZN(K)?(3c10|2at|5torch)", s)]
    assert cxx_torch == []
    shims = [s for s in undefined.split() if s.startswith(("aoti_torch_", "torch_"))]
    assert shims, "no stable shim is called: the check above would prove nothing"
    assert not any(s.startswith("Py") for s in undefined.split())
    needed = subprocess.run(["readelf", "-d", str(LIBRARY)], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    libs = set(re.findall(r"Shared library: \[([^\]]+)\]", needed))
    assert "libtorch_cpu.so" in libs
    assert not {lib for lib in libs if re.match(r"lib(c10|torch(?!_cpu)|python)", lib)}


def _autograd_kernel_calls(x, weight):
    """How many Python functions of torch's kernel for a Python-registered autograd formula
    (torch/_library/autograd.py) one kv.rmsnorm call ran."""
    seen, kernel = [], ("_library", "autograd.py")

    def profile(frame, event, arg):
        if event == "call" and Path(frame.f_code.co_filename).parts[-2:] == kernel:
            seen.append(frame.f_code.co_name)

    before = sys.getprofile()  # a profiler the run has (a debugger's, a tool's) is put back
    sys.setprofile(profile)
    try:
        kv.rmsnorm(x, weight, 1e-5)
    finally:
        sys.setprofile(before)
    return len(seen)


def test_rmsnorm_passes_its_python_autograd_kernel_only_where_a_graph_is_wanted():
    """The stable ABI's rmsnorm formula is registered from Python, whose kernel torch runs on
    every call of the op: where it would only call the op (grad mode off, or no input requiring
    grad), the front end calls the op below it; where a gradient is wanted, through it."""
    x, w = torch.randn(4, 48), torch.randn(48)
    assert _autograd_kernel_calls(x, w) == 0
    x_grad, w_grad = x.clone().requires_grad_(), w.clone().requires_grad_()
    with torch.no_grad():
        assert _autograd_kernel_calls(x_grad, w_grad) == 0
    assert _autograd_kernel_calls(x_grad, w) > 0  # the control: the kernel is seen when it runs
    assert _autograd_kernel_calls(x, w_grad) > 0
