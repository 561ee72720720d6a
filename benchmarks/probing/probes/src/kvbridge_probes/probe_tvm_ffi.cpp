// tvm-ffi with its defaults: typed functions exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC, an object
// registered with its reflection, no translation of exceptions and no argument checks of our
// own. A plain shared library, loaded with tvm_ffi.load_module (tvm_ffi_probe.py).
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "kvbridge/testing.hpp"

namespace ffi = tvm::ffi;

namespace {

std::atomic<int> g_live_owners{0};
std::atomic<int> g_live_adopted{0};
const void* g_adopted_address = nullptr;

// A member object: tvm-ffi fields hold FFI values, so a struct member is an object of its own.
class CountersObj : public ffi::Object {
 public:
  std::int64_t value = 0;
  static constexpr bool _type_mutable = true;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("kvbridge_probes.Counters", CountersObj, ffi::Object);
};

class OwnerObj : public ffi::Object {
 public:
  OwnerObj() : counters(ffi::make_object<CountersObj>()) { ++g_live_owners; }
  ~OwnerObj() { --g_live_owners; }
  ffi::ObjectRef counters;
  std::int64_t value = 0;
  static constexpr bool _type_mutable = true;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("kvbridge_probes.Owner", OwnerObj, ffi::Object);
};

// The same methods, and its value as a method: the object a Python class wraps, as
// kvbridge_tvm_ffi's BlockPool wraps the core's (tvm-ffi fields are stored values: a computed
// property is a Python property over a method).
class HeldObj : public ffi::Object {
 public:
  std::int64_t stored = 0;
  static constexpr bool _type_mutable = true;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("kvbridge_probes.Held", HeldObj, ffi::Object);
};

// A buffer the library allocates and counts, handed out as a tvm::ffi::Tensor.
struct CountedAlloc {
  void AllocData(DLTensor* tensor) {
    tensor->data = new std::int64_t[1024]();
    g_adopted_address = tensor->data;
    ++g_live_adopted;
  }
  void FreeData(DLTensor* tensor) {
    delete[] static_cast<std::int64_t*>(tensor->data);
    --g_live_adopted;
  }
};

void noop() {}
std::int64_t take_int64(std::int64_t x) { return x; }
std::int32_t take_int32(std::int32_t x) { return x; }
void throw_kind(const ffi::String& kind) { kvbridge::testing::throw_kind(std::string(kind)); }
bool wait_for_python(std::int64_t address, double timeout_s) {
  return kvbridge::testing::wait_for_python(address, timeout_s);
}
std::int64_t array_address(ffi::TensorView t) {
  return reinterpret_cast<std::int64_t>(t.data_ptr());
}
std::int64_t array_and_int(ffi::TensorView t, std::int64_t x) {
  return reinterpret_cast<std::int64_t>(t.data_ptr()) ^ x;
}
std::int64_t arrays_address(ffi::TensorView a, ffi::TensorView b) {
  return reinterpret_cast<std::int64_t>(a.data_ptr()) ^
         reinterpret_cast<std::int64_t>(b.data_ptr());
}
// rmsnorm(out=)'s arguments: x, the weight, out, and eps.
std::int64_t three_arrays(ffi::TensorView x, ffi::TensorView w, ffi::TensorView out, double eps) {
  return reinterpret_cast<std::int64_t>(x.data_ptr()) ^
         reinterpret_cast<std::int64_t>(w.data_ptr()) ^
         reinterpret_cast<std::int64_t>(out.data_ptr()) ^ static_cast<std::int64_t>(eps > 0);
}
// The raw data-pointer loop a kernel writes: element 1, the strides unread.
std::int64_t second_element(ffi::TensorView t) {
  return static_cast<const std::int64_t*>(t.data_ptr())[1];
}
std::int64_t numel_of(ffi::TensorView t) { return t.numel(); }
std::int64_t take_vector(ffi::Array<std::int64_t> v) { return static_cast<std::int64_t>(v.size()); }
ffi::Array<std::int64_t> returned_vector() { return ffi::Array<std::int64_t>({1, 2, 3}); }
ffi::Tensor adopted() {
  return ffi::Tensor::FromNDAlloc(CountedAlloc{}, ffi::Shape({1024}), DLDataType{kDLInt, 64, 1},
                                  DLDevice{kDLCPU, 0});
}
std::int64_t adopted_address() { return reinterpret_cast<std::int64_t>(g_adopted_address); }
std::int64_t live_adopted() { return g_live_adopted.load(); }
std::int64_t live_owners() { return g_live_owners.load(); }

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::ObjectDef<CountersObj>().def_ro("value", &CountersObj::value);
  refl::ObjectDef<OwnerObj>()
      .def(refl::init<>())
      .def_ro("counters", &OwnerObj::counters)  // a field holding the member object
      .def_ro("value", &OwnerObj::value)        // the floor for a property: a field read
      .def("bump",
           [](OwnerObj* o) { ++const_cast<CountersObj*>(o->counters.as<CountersObj>())->value; })
      .def("noop", [](OwnerObj*) {})  // the floor for a method
      .def("take_int64", [](OwnerObj*, std::int64_t x) { return x; });
  refl::ObjectDef<HeldObj>()
      .def(refl::init<>())
      .def("noop", [](HeldObj*) {})
      .def("take_int64", [](HeldObj*, std::int64_t x) { return x; })
      .def("value", [](HeldObj* h) { return h->stored; });
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(noop, noop)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(take_int64, take_int64)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(take_int32, take_int32)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(throw_kind, throw_kind)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(wait_for_python, wait_for_python)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(array_address, array_address)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(arrays_address, arrays_address)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(array_and_int, array_and_int)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(three_arrays, three_arrays)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(second_element, second_element)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(numel_of, numel_of)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(take_vector, take_vector)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(returned_vector, returned_vector)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(adopted, adopted)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(adopted_address, adopted_address)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(live_adopted, live_adopted)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(live_owners, live_owners)
