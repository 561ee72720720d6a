"""The questions the probes ask that the pages' rules read: each question's row name and what
the contract expects of its answer, in one place for the probes (probe_semantics.py) and the
renderer (render.py), which must agree on every name."""

from __future__ import annotations

# What a careful binding does with each question, where the answer is an exception or a value:
# `raises`, the contract's exception type for a bad input (None: the input is valid); `valid`,
# whether returning a value is right. Opt-in rows are idioms a user must choose (a return policy,
# forcecast): they are shown, and not counted among the traps a technology's defaults leave.
EXPECT: dict[str, dict] = {
    "'3' where an int is expected": {"raises": "TypeError", "valid": False},
    "1.5 where an int is expected": {"raises": "TypeError", "valid": False},
    "None where an int is expected": {"raises": "TypeError", "valid": False},
    # A bool is an int in Python: accepting it is a choice (kvbridge refuses it), not a wrong value.
    "True where an int is expected": {"raises": "TypeError", "valid": True},
    "numpy.int64(3) where an int is expected": {"raises": None, "valid": True},
    "a missing argument": {"raises": "TypeError", "valid": False},
    "an extra argument": {"raises": "TypeError", "valid": False},
    "2**40 to int32": {"raises": "OverflowError", "valid": False},
    "2**70 to int64": {"raises": "OverflowError", "valid": False},
    "TORCH_CHECK": {"raises": "RuntimeError", "valid": False},
    "TORCH_CHECK_VALUE": {"raises": "ValueError", "valid": False},
    "TORCH_CHECK_INDEX": {"raises": "IndexError", "valid": False},
    "TORCH_CHECK_TYPE": {"raises": "TypeError", "valid": False},
    "TORCH_CHECK_NOT_IMPLEMENTED": {"raises": "NotImplementedError", "valid": False},
}
# The contiguity opt-in a kernel that wants one dense int64 block asks for, per technology: the
# same two questions asked through it (numpy_technology).
CONTIGUOUS_VIEW = "strided int64 view, through the contiguity opt-in"
CONTIGUOUS_INT32 = "int32 array, through the contiguity opt-in"
CONTIGUOUS_IDIOM = {"pybind11": "`py::array_t<int64_t, c_style | forcecast>`",
                    "nanobind": "`nb::ndarray<int64_t, nb::c_contig>`",
                    "Cython": "`int64_t[::1]` memoryview"}  # fmt: skip
OPT_IN = {CONTIGUOUS_VIEW, CONTIGUOUS_INT32, "`reference` policy on a temporary's member"}
INT_CHECK = "how an int argument is converted"  # one cause: the technology's int conversion
ARITY = "how a call's arguments are matched to its declaration"
# The one row for a C++ throw that nothing catches, and the cause that joins the C ABI's rows.
UNDECLARED = "a C++ throw through a declaration without exception handling"
ESCAPE = 'a C++ exception escaping an extern "C" function'
