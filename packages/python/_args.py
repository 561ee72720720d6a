"""The contract's argument rules (docs/contract.md, "Errors"), written once for the packages whose
front end is Python (packages/registry.json's `shares` says which). Each wheel carries this
file beside its front end (README.md here). The compiled front ends follow the same rules from
packages/args/args.hpp, at the level of the CPython API.

What a rule decides here, and nowhere else in the packages that share this file:
- an int: a Python int or anything with __index__ (numpy ints), never a bool (numpy's either),
  float, str or None (TypeError), and within int64 (OverflowError); narrower ranges are the
  core's to check;
- eps: a real number (numbers.Real): never a bool, str, None or an array, 0-d included;
- tokens: lists and tuples copied element by element as ints; arrays read in place when their
  dtype is int32, int64 or (where the function compares it exactly) uint64, in native byte order
  with whole-element strides, and converted to int64 otherwise; type before shape;
- floats: float32 in either byte order; byte-swapped data and strides that are not whole
  elements converted to a native copy; type before shape;
- out=: a writeable C-contiguous float32 numpy array;
- the PoolStats view: read-only, no constructor, its repr written by the core;
- BlockPool's members: one table (POOL_MEMBERS), which every front end's class is checked
  against and completed from when it is made (`block_pool`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from operator import index as _index
from typing import Any

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Token dtypes the core reads in place, as their kvb_dtype (KVB_INT32, KVB_INT64, KVB_UINT64). A
# byte-swapped dtype compares unequal, so it is converted like every other.
IN_PLACE = {np.dtype(np.int32): 0, np.dtype(np.int64): 1, np.dtype(np.uint64): 2}
UINT64 = 2
# The same rule as one lookup, by keep_uint64: dtype -> (kvb_dtype, itemsize). A 1-D array of
# such a dtype whose stride is a whole number of elements is read in place (`in_place_code`; the
# per-call fast paths test it inline, and the C ABI front end derives its stride from it).
READ_IN_PLACE = {keep: {dtype: (code, dtype.itemsize) for dtype, code in IN_PLACE.items()
                        if keep or code != UINT64} for keep in (False, True)}  # fmt: skip

# numpy's own native float32 dtype: an array that has it by identity takes the per-call fast
# paths below, which look nothing else up (an equal dtype that is another object takes the rules).
FLOAT32 = np.dtype(np.float32)


def describe(value: object) -> str:
    """A wrong value as every message names it: its type, qualified outside builtins, and repr."""
    cls = type(value)
    name = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"
    return f"{name}: {value!r}"


def as_int64(value: Any) -> int:
    """An int argument as the contract reads it."""
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:  # the common case, first
        return value
    # numpy.bool_ too: its __index__ is deprecated in some numpy releases, an error in others.
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise TypeError(f"expected an int, got {describe(value)}")
    i = _index(value)
    if i < INT64_MIN or i > INT64_MAX:
        raise OverflowError(f"{i} does not fit in int64")
    return i


def as_eps(value: Any) -> float:
    """eps as the contract reads it: a real number. Its range is the core's to check."""
    if type(value) is float:  # the common case, first
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"eps must be a float, got {describe(value)}")
    return float(value)


def array_of(obj: Any, name: str, what: str) -> np.ndarray:
    """numpy's view of an array argument, refusing what is not numeric data at all (None, str,
    arbitrary objects) before numpy turns it into an object array."""
    if obj is None or isinstance(obj, str):
        raise TypeError(f"{name} must be {what}, got {describe(obj)}")
    arr = obj if type(obj) is np.ndarray else np.asarray(obj)
    if arr.dtype.kind == "O":
        raise TypeError(f"{name} must be {what}, got {describe(obj)}")
    return arr


def in_place_code(arr: np.ndarray, keep_uint64: bool) -> int | None:
    """The kvb_dtype of a 1-D array the core can read as it is, or None to convert it."""
    known = READ_IN_PLACE[keep_uint64].get(arr.dtype)
    if known is None or arr.strides[0] % known[1]:
        return None
    return known[0]


def tokens(obj: Any, name: str, keep_uint64: bool) -> tuple[np.ndarray, int]:
    """A token argument as a 1-D integer array the core reads in place, and its kvb_dtype:
    `keep_uint64` where the function compares uint64 exactly (count_eos), else uint64 converts."""
    if type(obj) is np.ndarray and obj.ndim == 1:  # the per-call fast path: a dict lookup
        known = READ_IN_PLACE[keep_uint64].get(obj.dtype)
        if known is not None and not obj.strides[0] % known[1]:
            return obj, known[0]
    if isinstance(obj, (list, tuple)):
        return np.array([as_int64(v) for v in obj], dtype=np.int64), 1
    arr = array_of(obj, name, "an integer array or sequence")
    if arr.dtype.kind not in "iu":  # type before shape
        raise TypeError(f"{name} must have an integer dtype, got {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    code = in_place_code(arr, keep_uint64)
    return (arr, code) if code is not None else (arr.astype(np.int64), 1)


def floats(obj: Any, name: str) -> np.ndarray:
    """A float32 argument as an array the core reads in place (a native copy where it cannot)."""
    # The per-call fast path: what the rules below would return as it is. numpy's ALIGNED flag
    # (one flag read, where mapping % over the strides cost 200 ns a call) says the address and
    # every stride along a dimension longer than 1 are multiples of 4; a length-1 dimension's
    # stride is never stepped along (numpy's DLPack export ignores it too).
    if type(obj) is np.ndarray and obj.dtype is FLOAT32 and obj.flags.aligned:
        return obj
    arr = array_of(obj, name, "a float32 array")
    if arr.dtype.kind != "f" or arr.dtype.itemsize != 4:  # float32 in either byte order
        raise TypeError(f"{name} must be float32, got {arr.dtype}")
    if not arr.dtype.isnative or any(s % 4 for s in arr.strides):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
    return arr


def numpy_out(out: Any) -> np.ndarray:
    """rmsnorm's out=: its type and dtype (TypeError), then its layout (ValueError). Called
    after x's and weight's types and before the core compares any shape."""
    if type(out) is np.ndarray and out.dtype is FLOAT32:  # the per-call fast path
        flags = out.flags
        if flags.c_contiguous and flags.writeable:
            return out
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {describe(out)}")
    if out.dtype != np.float32:
        raise TypeError(f"out must be float32, got {out.dtype}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("out must be a writeable C-contiguous array")
    return out


def rmsnorm_arrays(x: Any, weight: Any, eps: Any, out: Any) -> tuple:
    """rmsnorm's arguments for a front end over numpy: (x, weight, eps, out, fresh), where out is
    a new float32 array of x's shape when none was given (`fresh`: kvbridge::Out in rmsnorm.hpp,
    a new buffer is not streamed). The core checks every shape before it writes."""
    c_eps = eps if type(eps) is float else as_eps(eps)
    xa, wa = floats(x, "x"), floats(weight, "weight")
    if out is None:
        return xa, wa, c_eps, np.empty(xa.shape, np.float32), True
    return xa, wa, c_eps, numpy_out(out), False


class PoolStats:
    """Live view of one pool's counters; holds what keeps its pool alive. A package makes one
    with `PoolStats._view(owner, read, repr)`: `read(owner)` returns (allocated_total,
    released_total, peak_in_use), `repr(owner)` the core's text."""

    __slots__ = ("_owner", "_read", "_repr")
    _owner: Any
    _read: Callable[[Any], tuple]
    _repr: Callable[[Any], str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("PoolStats has no constructor: use BlockPool.stats")

    @classmethod
    def _view(cls, owner: Any, read: Callable[[Any], tuple], text: Callable[[Any], str]):
        self = object.__new__(cls)
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_read", read)
        object.__setattr__(self, "_repr", text)
        return self

    @property
    def allocated_total(self) -> int:
        return self._read(self._owner)[0]

    @property
    def released_total(self) -> int:
        return self._read(self._owner)[1]

    @property
    def peak_in_use(self) -> int:
        return self._read(self._owner)[2]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"PoolStats.{name} is read-only")

    def __repr__(self) -> str:
        return self._repr(self._owner)


# --- BlockPool: its members, once --------------------------------------------------------------

# The contract's BlockPool (docs/contract.md, "API"), member by member: name -> (kind, what it
# says of itself). Each front end writes the members that call its library; `block_pool` makes
# that class the contract's from this table.
POOL_MEMBERS: dict[str, tuple[str, str | None]] = {
    "__init__": ("method", "A pool of num_blocks blocks, all free."),
    "num_blocks": ("property", "How many blocks the pool has."),
    "num_free": ("property", "How many blocks are free now."),
    "allocate": ("method", "n free blocks, each at refcount 1; None when fewer are free."),
    "allocate_many": ("method", "Blocks for each count, all or nothing: None if not all fit."),
    "retain": ("method", "One more reference to an allocated block."),
    "release": ("method", "One reference fewer; at none the block is free again."),
    "refcount": ("method", "A block's references (0: free)."),
    "refcounts": ("method", "Every block's references: an int32 array of its own."),
    "stats": ("property", "A live view of the pool's counters, which keeps the pool alive."),
    "__repr__": ("method", None),
}


def _read_only(self: Any, name: str, value: Any) -> None:
    raise AttributeError(f"BlockPool.{name} is read-only")


def block_pool(stats_read: Callable[[Any], tuple], stats_repr: Callable[[Any], str]) -> Callable:
    """A class decorator that makes a front end's BlockPool the contract's, from POOL_MEMBERS:
    the class must define every member of the table but `stats`, which is made here over
    (stats_read, stats_repr) of the pool (PoolStats._view), and no other public one, or the
    import fails naming it; each member without a docstring gets the table's; every attribute
    is read-only. The members stay the functions the class defined, so no Python frame is added
    to any call."""

    def make(cls: type) -> type:
        written = {k for k in vars(cls) if not k.startswith("_") or k in POOL_MEMBERS}
        wanted = POOL_MEMBERS.keys() - {"stats"}
        if written != wanted:
            raise TypeError(f"{cls.__module__}.{cls.__name__} differs from the contract's "
                            f"BlockPool: missing {sorted(wanted - written)}, extra "
                            f"{sorted(written - wanted)}")  # fmt: skip

        def stats(self: Any) -> PoolStats:
            return PoolStats._view(self, stats_read, stats_repr)

        cls.stats = property(stats)
        cls.__setattr__ = _read_only
        for name, (kind, doc) in POOL_MEMBERS.items():
            member = vars(cls)[name]
            if doc is None or member.__doc__:
                continue
            if kind == "property":
                setattr(cls, name, property(member.fget, doc=doc))
            else:
                member.__doc__ = doc
        return cls

    return make
