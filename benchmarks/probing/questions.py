"""The questions every probe family answers (benchmarks/probing/ask_*.py), each defined once: its row on
the page, its axis (the group of rows it shows in), what the contract expects of its answer, and
whether it is an opt-in idiom. The probes (probe_semantics.py) check each family's answers
against this table, and the renderer (render.py) reads its expectations from it.

A family answers every question of every shared axis (SHARED_AXES), and the questions of the axes
that are its own (the torch families' checks and class methods); a missing or an unknown answer
is a TypeError naming it, at the end of that family's probe, not a gap found while rendering.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    row: str
    axis: str
    # The contract's exception type for a bad input (None: the input is valid), and whether
    # returning a value is right; rows without an expectation are judged by their kind alone.
    raises: str | None = None
    valid: bool = True
    # An idiom a user must choose (a return policy, forcecast): shown, never counted among the
    # traps a technology's defaults leave.
    opt_in: bool = False
    # An input a kernel may refuse rather than read (another dtype, a strided view): the trap is
    # reading it wrong; a refusal with an exception is the safe answer, not counted.
    may_refuse: bool = False


# Rows several families name in their answers' details or conditions.
UNDECLARED = "a C++ throw through a declaration without exception handling"
INT32_ARRAY = "int32 array to an int64 array parameter"
STRIDED = "strided int64 view"
READ_ONLY = "read-only int64 array"
LIST_VECTOR = "a list to a std::vector parameter"
ARRAY_VECTOR = "a numpy array to a std::vector parameter"
# The two rows above asked again through a technology's contiguity opt-in (its row's
# `contiguous_idiom` in benchmarks/technologies.json names it; ask_numpy.py asks).
CONTIGUOUS_VIEW = "strided int64 view, through the contiguity opt-in"
CONTIGUOUS_INT32 = "int32 array, through the contiguity opt-in"
RAW_LOOP = "a raw data-pointer loop over a strided view"
MISSING_ARGUMENT = "a missing argument"
EXTRA_ARGUMENT = "an extra argument"
TEMPORARY_ROW = "an address taken from a temporary array, read with the GIL released (8 threads)"
CONTIGUOUS_WRITE = ".contiguous() on a view, then a write"
RETURNED_VECTOR = "a returned std::vector"
ZERO_COPY = "zero-copy return idiom"
ATTRIBUTE = "attribute returning a member"
CONST_REF = "method returning const&"
REFERENCE_POLICY = "`reference` policy on a temporary's member"
# An object that crosses as a handle (an int the library hands out; the stable ABI has no
# custom classes): the handle given to a call after the object was freed.
HANDLE_AFTER_FREE = "an object's handle used after the object was freed"
GIL = "GIL during a long C++ call"
CHECKS = ["TORCH_CHECK", "TORCH_CHECK_VALUE", "TORCH_CHECK_INDEX", "TORCH_CHECK_TYPE",
          "TORCH_CHECK_NOT_IMPLEMENTED"]  # fmt: skip

# The probe's tables that are not questions, shown as they are with no severities: what torch's
# tools make of each callable, and whether each C ABI technology binds a library with no
# compiler (ask_c_abi.py).
NO_COMPILER = "no compiler"
TOOLS = ("torch.compile", "torch.jit.script", "torch.library.opcheck", NO_COMPILER)

# The causes that join several rows into one trap (outcomes.py counts a cause once).
INT_CHECK = "how an int argument is converted"
ARITY = "how a call's arguments are matched to its declaration"
TRANSLATION = "how a C++ exception is translated"
ESCAPE = 'a C++ exception escaping an extern "C" function'


def _axis(axis: str, *questions: tuple) -> dict[str, Question]:
    return {q[0]: Question(q[0], axis, *q[1:]) for q in questions}


# The questions of each axis, in the page's order. The exception kinds are the core's own
# (c_abi.h's kvb_status, read at run time): `exception_questions` makes their rows.
QUESTIONS: dict[str, dict[str, Question]] = {
    "undeclared throw": _axis("undeclared throw", (UNDECLARED, "RuntimeError", False)),
    "arguments": _axis(
        "arguments",
        ("'3' where an int is expected", "TypeError", False),
        ("1.5 where an int is expected", "TypeError", False),
        ("None where an int is expected", "TypeError", False),
        # A bool is an int in Python: accepting it is a choice (kvbridge refuses it), not a
        # wrong value.
        ("True where an int is expected", "TypeError", True),
        ("numpy.int64(3) where an int is expected", None, True),
        (MISSING_ARGUMENT, "TypeError", False),
        (EXTRA_ARGUMENT, "TypeError", False),
    ),
    "overflow": _axis(
        "overflow",
        ("2**40 to int32", "OverflowError", False),
        ("2**70 to int64", "OverflowError", False),
    ),  # fmt: skip
    "gil": _axis("gil", (GIL,)),
    "arrays": _axis(
        "arrays",
        (INT32_ARRAY, None, True, False, True),
        (STRIDED, None, True, False, True),
        (READ_ONLY,),
        (LIST_VECTOR,),
        (ARRAY_VECTOR,),
        (CONTIGUOUS_VIEW, None, True, True),
        (CONTIGUOUS_INT32, None, True, True),
        (RAW_LOOP,),
        (TEMPORARY_ROW,),
        (CONTIGUOUS_WRITE,),
    ),  # fmt: skip
    "returned buffer": _axis("returned buffer", (RETURNED_VECTOR,), (ZERO_COPY,)),
    "references": _axis(
        "references",
        (ATTRIBUTE,),
        (CONST_REF,),
        (REFERENCE_POLICY, None, True, True),
        (HANDLE_AFTER_FREE, "ValueError", False),
    ),
    "torch checks": _axis(
        "torch checks",
        ("TORCH_CHECK", "RuntimeError", False),
        ("TORCH_CHECK_VALUE", "ValueError", False),
        ("TORCH_CHECK_INDEX", "IndexError", False),
        ("TORCH_CHECK_TYPE", "TypeError", False),
        ("TORCH_CHECK_NOT_IMPLEMENTED", "NotImplementedError", False),
    ),  # fmt: skip
}
# Every family answers these axes, and "exceptions" (the core's kinds).
SHARED_AXES = ("undeclared throw", "arguments", "overflow", "gil", "arrays", "returned buffer",
               "references")  # fmt: skip
# Axes whose rows are the exception kinds: each row raises the contract's type for its kind.
KIND_AXES = ("exceptions", "custom-class method")


def expectation(axis: str, row: str) -> Question | None:
    """What the contract expects of one row's answer (None: judged by its kind alone)."""
    return QUESTIONS.get(axis, {}).get(row)


OPT_IN = {q.row for rows in QUESTIONS.values() for q in rows.values() if q.opt_in}


def checked(technology: str, answers: dict, kinds: list[str]) -> dict:
    """A family's answers for one technology, every axis in the table's row order; a TypeError
    naming each missing or unknown answer."""
    problems = [f"no {axis} answers" for axis in ("exceptions", *SHARED_AXES)
                if axis not in answers]  # fmt: skip
    ordered = {}
    for axis, rows in answers.items():
        asked = kinds if axis in KIND_AXES else list(QUESTIONS.get(axis, rows))
        missing = [r for r in asked if r not in rows]
        unknown = [r for r in rows if r not in asked]
        problems += [f"{axis}: no answer to {r!r}" for r in missing]
        problems += [f"{axis}: {r!r} is no question of the table" for r in unknown]
        ordered[axis] = {r: rows[r] for r in asked if r in rows}
    if problems:
        raise TypeError(f"{technology}: " + "; ".join(problems))
    return ordered
