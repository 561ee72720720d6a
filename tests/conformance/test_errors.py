"""docs/contract.md, "Errors": how every standard C++ exception crosses the boundary. Paired with
common_cpp/tests/test_errors.cpp."""

import pytest

# kind -> Python exception: the mapping pybind11, nanobind and torch share. ◆ marks Cython's
# native outliers, which kvbridge_cython brings into line.
MAPPING = {
    "invalid_argument": ValueError,
    "domain_error": ValueError,
    "length_error": ValueError,  # ◆
    "out_of_range": IndexError,
    "range_error": ValueError,  # ◆
    "overflow_error": OverflowError,
    "underflow_error": RuntimeError,  # ◆
    "bad_alloc": MemoryError,
    "bad_cast": RuntimeError,  # ◆
    "ios_failure": RuntimeError,  # ◆
    "logic_error": RuntimeError,
    "runtime_error": RuntimeError,
    "system_error": RuntimeError,
    "custom": RuntimeError,
    "non_std": RuntimeError,
}
# Kinds whose C++ object carries kvbridge's what() text (the others' what() is the library's).
WITH_MESSAGE = set(MAPPING) - {"bad_alloc", "bad_cast", "non_std"}


@pytest.mark.parametrize("kind", sorted(MAPPING))
def test_exception_kind_maps_to_contract_type(kv, kind):
    with pytest.raises(Exception) as info:
        kv._testing.throw(kind)
    # Exactly the contract's class, not merely a subclass of it (ArithmeticError would pass for
    # OverflowError's parent otherwise).
    assert type(info.value) is MAPPING[kind]


@pytest.mark.parametrize("kind", sorted(WITH_MESSAGE))
def test_exception_message_is_what_text(kv, kind):
    with pytest.raises(MAPPING[kind]) as info:
        kv._testing.throw(kind)
    # system_error's what() appends the error code's text after the message.
    assert str(info.value).startswith(f"kvbridge test exception: {kind}")


def test_unknown_kind_is_value_error_naming_it(kv):
    with pytest.raises(ValueError, match="unknown exception kind: 'no_such_kind'"):
        kv._testing.throw("no_such_kind")


def test_throw_kind_of_wrong_type_is_type_error(kv):
    with pytest.raises(TypeError):
        kv._testing.throw(42)


def test_interpreter_survives_every_kind(kv):
    # A throw that escaped translation would abort the process before this line.
    for kind, exception in MAPPING.items():
        with pytest.raises(exception):
            kv._testing.throw(kind)
    assert kv.BlockPool(1).num_free == 1
