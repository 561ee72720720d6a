"""docs/contract.md, "Errors": how every standard C++ exception crosses the boundary. Paired with
common_cpp/tests/test_errors.cpp."""

import subprocess
import sys

import pytest
from common import EXCEPTION_TYPES, WITH_MESSAGE, refused


@pytest.mark.parametrize("kind", sorted(EXCEPTION_TYPES))
def test_exception_kind_maps_to_contract_type(kv, kind):
    with pytest.raises(Exception) as info:
        kv._testing.throw(kind)
    # Exactly the contract's class, not merely a subclass of it (ArithmeticError would pass for
    # OverflowError's parent otherwise).
    assert type(info.value) is EXCEPTION_TYPES[kind]


@pytest.mark.parametrize("kind", sorted(WITH_MESSAGE))
def test_exception_message_is_what_text(kv, kind):
    with pytest.raises(EXCEPTION_TYPES[kind]) as info:
        kv._testing.throw(kind)
    # system_error's what() appends the error code's text after the message.
    assert str(info.value).startswith(f"kvbridge test exception: {kind}")


def test_unknown_kind_is_value_error_naming_it(kv):
    with refused(ValueError, "unknown exception kind: 'no_such_kind'"):
        kv._testing.throw("no_such_kind")


def test_throw_kind_of_wrong_type_is_type_error(kv):
    with refused(TypeError):
        kv._testing.throw(42)


def test_interpreter_survives_every_kind(kv):
    """Every kind thrown in a fresh interpreter, which must then go on and exit normally: a
    throw that escaped translation (an extern "C" boundary, a declaration without `except +`)
    aborts the process, which in-process would take the whole suite down with it instead of
    failing this test."""
    code = (
        f"import {kv.__name__} as kv\n"
        f"for kind in {sorted(EXCEPTION_TYPES)!r}:\n"
        "    try:\n"
        "        kv._testing.throw(kind)\n"
        "    except Exception:\n"
        "        pass\n"
        "print(kv.BlockPool(1).num_free)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.strip() == "1"


def test_missing_and_extra_arguments_are_type_errors(kv):
    """A call with an argument too few or too many is Python's TypeError, for a function and a
    method alike, and changes nothing."""
    pool = kv.BlockPool(4)
    calls = [
        (kv.count_eos, ([1, 2],)),
        (kv.count_eos, ([1, 2], 2, 3)),
        (kv.common_prefix, ([1],)),
        (pool.allocate, ()),
        (pool.allocate, (1, 2)),
        (pool.release, ()),
    ]
    for fn, args in calls:
        with refused(TypeError):
            fn(*args)
    assert pool.num_free == 4
