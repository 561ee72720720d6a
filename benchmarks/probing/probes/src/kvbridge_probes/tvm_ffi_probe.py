"""The tvm-ffi probe library (probe_tvm_ffi.cpp) as its users load it: tvm_ffi.load_module, and a
Python class registered for each of its object types."""

from pathlib import Path

import tvm_ffi

_lib = tvm_ffi.load_module(str(Path(__file__).parent / "libkvbridge_probe_tvm_ffi.so"))


@tvm_ffi.register_object("kvbridge_probes.Counters")
class Counters(tvm_ffi.Object):
    pass


@tvm_ffi.register_object("kvbridge_probes.Owner")
class Owner(tvm_ffi.Object):
    pass


@tvm_ffi.register_object("kvbridge_probes.Held")
class Held(tvm_ffi.Object):
    """The probe object as kvbridge_tvm_ffi's BlockPool is written: Python methods and a
    property over its C++ methods, each looked up once."""

    def noop(self):
        _held_noop(self)

    def take_int64(self, x):
        return _held_take_int64(self, x)

    @property
    def value(self):
        return _held_value(self)


_HELD = {m.name: m.func for m in Held.__tvm_ffi_type_info__.methods}
_held_noop, _held_take_int64, _held_value = _HELD["noop"], _HELD["take_int64"], _HELD["value"]

noop, take_int64, take_int32 = _lib.noop, _lib.take_int64, _lib.take_int32
throw_kind, wait_for_python = _lib.throw_kind, _lib.wait_for_python
array_address, second_element, numel_of = _lib.array_address, _lib.second_element, _lib.numel_of
arrays_address, array_and_int = _lib.arrays_address, _lib.array_and_int
three_arrays = _lib.three_arrays
take_vector, returned_vector = _lib.take_vector, _lib.returned_vector
adopted, adopted_address, live_adopted = _lib.adopted, _lib.adopted_address, _lib.live_adopted
live_owners = _lib.live_owners
