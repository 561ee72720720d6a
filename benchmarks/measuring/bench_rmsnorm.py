"""RMSNorm against the copy of the same bytes, a plain C loop doing the same work (the machine's
floor for it, in each dtype: ordinary and non-temporal stores), F.rms_norm, torch.compile and
numpy, at a stated thread count on every side. Paired with tests/conformance/test_rmsnorm.py.

`out=` calls are compared with the copy into a preallocated output. Allocating calls are compared
only with calls that allocate through the same allocator: numpy's (which asks the kernel for huge
pages) for the numpy packages, torch's (4 KiB pages, unless THP_MEM_ALLOC_ENABLE=1) for
kvbridge_torch, F.rms_norm and torch.compile; each allocator's own floor is a copy into a fresh
array (`x.copy()`, `x.clone()`). Beside each copy, the simplest one-pass operation through the
same allocator (`np.negative(x)`, `torch.neg(x)`): what writing a fresh array with ordinary
stores costs there, which a copy does not pay. numpy is single-threaded, so its cases appear in
the one-thread groups only.
"""

from __future__ import annotations

import numpy as np

import spec
from measuring.harness import Case, Group
from spec import case_key
from traffic import copy_bytes, rmsnorm_bytes


def _inputs(shape, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    w = rng.standard_normal(shape[-1], dtype=np.float32).astype(dtype)
    return x, w, np.empty_like(x)


def _torch_floors(on: str, x, w, threads: int, tag: str = "") -> list[Case]:
    try:
        import torch
    except ImportError:
        return []
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    width = x.shape[-1]
    compiled = torch.compile(
        lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + spec.EPS) * w
    )
    torch.set_num_threads(threads)
    compiled(tx, tw)  # compiled once, outside the timed rounds
    prepare = spec.torch_threads(threads)
    f = torch.nn.functional.rms_norm
    return [
        Case(case_key(f"rmsnorm {tag}{on}", "torch alloc copy"), "x.clone()", lambda: {"x": tx}, prepare,
             meta={"package": "torch alloc copy", "bytes": copy_bytes(x.nbytes)}),
        Case(case_key(f"rmsnorm {tag}{on}", "torch one pass"), "neg(x)", lambda: {"neg": torch.neg, "x": tx},
             prepare, meta={"package": "torch one pass", "bytes": copy_bytes(x.nbytes)}),
        Case(case_key(f"rmsnorm {tag}{on}", "F.rms_norm"), "f(x, (width,), w, eps)",
             lambda: {"f": f, "x": tx, "w": tw, "width": width, "eps": spec.EPS}, prepare,
             meta={"package": "F.rms_norm"}),
        Case(case_key(f"rmsnorm {tag}{on}", "torch.compile"), "f(x, w)",
             lambda: {"f": compiled, "x": tx, "w": tw}, prepare,
             meta={"package": "torch.compile"}),
    ]  # fmt: skip


def _group(shape, threads: int, quick: bool) -> Group:
    from kvbridge_probes import probe_floors

    on = f"{spec.shape_label(shape)} {threads}t"
    x, w, out = _inputs(shape)
    nbytes, copied = rmsnorm_bytes(x.nbytes, w.nbytes), copy_bytes(x.nbytes)
    cases = []
    for p in spec.installed():
        to = spec.native(p)
        # out= writes the copy's own output array: the same pages for every package and the
        # floor. With an array each, packages that call the same kernel read apart by more than
        # their rounds' spread in one run, as if the pages themselves differed.
        ns = {"kv": spec.module(p), "x": to(x), "w": to(w), "out": to(out), "eps": spec.EPS}
        prepare = spec.thread_setter(p, threads)
        meta = {"package": p, "bytes": nbytes, "threads": threads}
        cases += [
            Case(case_key(f"rmsnorm {on}", p), "kv.rmsnorm(x, w, eps)", lambda ns=ns: ns, prepare, meta),
            Case(case_key(f"rmsnorm out= {on}", p), "kv.rmsnorm(x, w, eps, out=out)", lambda ns=ns: ns,
                 prepare, meta),
        ]  # fmt: skip
    cases.append(Case(case_key(f"rmsnorm {on}", "copy"), "copy(out, x, threads)",
                      lambda: {"copy": probe_floors.copy, "out": out, "x": x, "threads": threads},
                      meta={"package": "copy", "bytes": copied}))  # fmt: skip
    cases += _loops(on, out, x, w, threads, "float32")
    if shape == spec.DECODE_SHAPE and threads == 1:
        cases += _calls_then_loops(on, out, x, w)
    cases += _torch_floors(on, x, w, threads)
    if threads == 1:
        cases.append(Case(case_key(f"rmsnorm {on}", "numpy alloc copy"), "x.copy()", lambda: {"x": x},
                          meta={"package": "numpy alloc copy", "bytes": copied}))  # fmt: skip
        cases.append(Case(case_key(f"rmsnorm {on}", "numpy one pass"), "neg(x)",
                          lambda: {"neg": np.negative, "x": x},
                          meta={"package": "numpy one pass", "bytes": copied}))  # fmt: skip
        cases.append(Case(case_key(f"rmsnorm {on}", "numpy"),
                          "x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w",
                          lambda: {"np": np, "x": x, "w": w, "eps": spec.EPS},
                          meta={"package": "numpy"}))  # fmt: skip
    return Group(f"rmsnorm {spec.shape_label(shape)} float32, {threads} thread(s)", cases,
                 **_rounds(x.nbytes, quick))  # fmt: skip


def _rounds(nbytes: int, quick: bool) -> dict:
    """A group's rounds by the bytes of its x, whatever its dtype: fewer, longer rounds past
    16 MiB, where a call takes milliseconds and a short round holds only a few."""
    big = nbytes > 16 << 20
    return {"rounds": 5 if quick else (9 if big else 15),
            "round_seconds": 0.005 if quick else (0.1 if big else 0.02)}  # fmt: skip


def _loops(on: str, out, x, w, threads: int, dtype: str) -> list[Case]:
    """The plain C loop (probe_floors.rmsnorm) once per store kind: the machine's floor for
    this work, writing the copy's own output."""
    from kvbridge_probes import probe_floors

    return [Case(case_key(f"rmsnorm {on}", loop), "loop(out, x, w, eps, threads, stream, dtype)",
                 lambda stream=stream: {"loop": probe_floors.rmsnorm, "out": out, "x": x, "w": w, "eps": spec.EPS,
                                        "threads": threads, "stream": stream, "dtype": dtype},
                 meta={"package": loop, "bytes": rmsnorm_bytes(x.nbytes, w.nbytes)})
            for loop, stream in spec.FLOOR_LOOPS.items()]  # fmt: skip


def _calls_then_loops(on: str, out, x, w) -> list[Case]:
    """The decode step's second floor (spec.DECODE_FLOOR_CALL): each installed package's
    technology's own call given rmsnorm(out=)'s kinds of argument, passed as the package passes
    arrays (its registry row's `arrays`), then the plain C loop writing the copy's output, each
    store kind, one statement. One case a technology, however many packages share it."""
    from kvbridge_probes import probe_floors

    from measuring.bench_call_overhead import technology_calls

    calls, cases = technology_calls(spec.DECODE_FLOOR_CALL[0]), {}
    for p in spec.installed():
        if (row := spec.REGISTRY[p]["arrays"]) not in calls:
            continue
        stmt, namespace = calls[row]
        for loop, stream in spec.FLOOR_LOOPS.items():
            key = case_key(f"rmsnorm {on}", spec.call_then_loop(p, loop))
            ns = {**namespace, "loop": probe_floors.rmsnorm, "x_": x, "w_": w, "out_": out,
                  "eps": spec.EPS, "stream": stream}  # fmt: skip
            cases[key] = Case(key, f"{stmt}; loop(out_, x_, w_, eps, 1, stream, 'float32')",
                              lambda ns=ns: ns,
                              meta={"package": spec.who_of(key), "bytes": rmsnorm_bytes(x.nbytes, w.nbytes)})  # fmt: skip
    return list(cases.values())


def _half_group(fmt: str, shape, threads: int, quick: bool) -> Group | None:
    """kvbridge_torch's 16-bit kernel against the copy of the same (2-byte) bytes (`out=`), and
    against F.rms_norm through the same allocator (both allocating their output)."""
    try:
        import torch
    except ImportError:
        return None
    if "torch" not in spec.installed():
        return None
    from kvbridge_probes import probe_floors

    on = f"{spec.shape_label(shape)} {threads}t"
    dtype = getattr(torch, spec.HALF_FORMATS[fmt])
    x32, w32, _ = _inputs(shape)
    x, w = torch.from_numpy(x32).to(dtype), torch.from_numpy(w32).to(dtype)
    out = torch.empty_like(x)
    # numpy has no bfloat16: the copy and the C loop take the same bytes as int16
    raw_x, raw_out, raw_w = (t.view(torch.int16).numpy() for t in (x, out, w))
    kv = spec.module("torch")
    cases = [
        Case(case_key(f"rmsnorm {fmt} out= {on}", "torch"), "kv.rmsnorm(x, w, eps, out=out)",
             lambda: {"kv": kv, "x": x, "w": w, "out": out, "eps": spec.EPS},
             spec.torch_threads(threads), {"package": "torch", "bytes": rmsnorm_bytes(x.nbytes, w.nbytes)}),
        Case(case_key(f"rmsnorm {fmt} {on}", "torch"), "kv.rmsnorm(x, w, eps)",
             lambda: {"kv": kv, "x": x, "w": w, "eps": spec.EPS},
             spec.torch_threads(threads), {"package": "torch", "bytes": rmsnorm_bytes(x.nbytes, w.nbytes)}),
        Case(case_key(f"rmsnorm {fmt} {on}", "copy"), "copy(out, x, threads)",
             lambda: {"copy": probe_floors.copy, "out": raw_out, "x": raw_x, "threads": threads},
             meta={"package": "copy", "bytes": copy_bytes(x.nbytes)}),
        *_loops(f"{fmt} {on}", raw_out, raw_x, raw_w, threads, spec.HALF_FORMATS[fmt]),
    ]  # fmt: skip
    f = torch.nn.functional.rms_norm
    cases.append(Case(case_key(f"rmsnorm {fmt} {on}", "F.rms_norm"), "f(x, (width,), w, eps)",
                      lambda: {"f": f, "x": x, "w": w, "width": shape[-1], "eps": spec.EPS},
                      spec.torch_threads(threads), {"package": "F.rms_norm"}))  # fmt: skip
    return Group(f"rmsnorm {spec.shape_label(shape)} {spec.HALF_FORMATS[fmt]} (torch), {threads} "
                 "thread(s)", cases, **_rounds(x.nbytes, quick))  # fmt: skip


def groups(quick: bool) -> list[Group]:
    shapes = (spec.DECODE_ROW, spec.DECODE_SHAPE) if quick else spec.RMS_SHAPES
    found = [_group(shape, t, quick) for shape in shapes for t in spec.THREAD_COUNTS]
    half = (spec.DECODE_SHAPE,) if quick else (spec.PREFILL_SHAPE, spec.HALF_SHAPE)
    found += [g for fmt in spec.HALF_FORMATS for shape in half for t in spec.THREAD_COUNTS
              if (g := _half_group(fmt, shape, t, quick))]  # fmt: skip
    return found
