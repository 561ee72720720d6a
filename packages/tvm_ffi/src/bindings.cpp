// libkvbridge_tvm_ffi: the kvbridge core as a tvm-ffi library. No CPython in it: the core is
// compiled in, and beyond the C++ runtime it links libtvm_ffi.so alone;
// kvbridge_tvm_ffi/__init__.py loads it with tvm_ffi.load_module, so one build serves every Python
// version tvm-ffi has a wheel for.
//
// Reads as a table of what is exposed; the argument rules are the Python front end's
// (packages/python/_args.py, applied in _tvm_ffi.py before any call reaches this file). tvm-ffi
// defaults that differ from the contract, and how this file handles them:
//  - every std::exception becomes RuntimeError (its type is lost) and any other throw
//    terminates the process: each function body runs in `guarded`, which sorts whatever it
//    throws with the core's catch chain (kvbridge::caught_exception) and rethrows it as a
//    tvm::ffi::Error whose kind is the contract's Python type, what() word for word;
//  - a DLTensor carries its dtype, shape and strides but nothing checks them: `tokens` and
//    `floats` read all three and refuse a dtype or device the core cannot read; a token array
//    the core does not read in place leaves as NotReadInPlace, which the front end answers by
//    the contract's rule (convert it, or raise the contract's error), so the call a decode loop
//    makes every step carries no dtype check in Python;
//  - tvm-ffi releases the GIL around every call (TVM_FFI_RELEASE_GIL_BY_DEFAULT), so the
//    kernels run without it and nothing here touches a Python object;
//  - a returned buffer: refcounts() hands out a tvm::ffi::Tensor that owns the core's Buffer
//    and frees it exactly once, when the last DLPack consumer of it lets go.
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kvbridge/errors.hpp"
#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"

namespace ffi = tvm::ffi;

namespace {

// --- errors ----------------------------------------------------------------------------------

// A token array the core does not read in place (not 1-D, or not of a dtype it reads): not an
// error of the contract's yet, since the front end may convert it (its kind, kNotReadInPlace,
// is registered there).
constexpr const char* kNotReadInPlace = "kvbridge.NotReadInPlace";
struct NotReadInPlace : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The library's one error path: whatever the body throws leaves as the contract's type (or as
// NotReadInPlace, for the front end to answer).
template <class F>
auto guarded(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const NotReadInPlace& e) {
    throw ffi::Error(kNotReadInPlace, e.what(), "");
  } catch (...) {
    const kvbridge::CaughtException caught = kvbridge::caught_exception();
    throw ffi::Error(kvbridge::python_exception_name(caught.status), caught.message, "");
  }
}

// --- arrays ----------------------------------------------------------------------------------

bool is(DLDataType t, DLDataTypeCode code, int bits) {
  return t.code == code && t.bits == bits && t.lanes == 1;
}

std::string dtype_name(DLDataType t) { return std::string(ffi::DLDataTypeToString(t)); }

const void* data_of(const ffi::TensorView& t, const char* name) {
  if (t.device().device_type != kDLCPU) {
    throw std::invalid_argument(std::string(name) + " must be in CPU memory");
  }
  return static_cast<const char*>(t.data_ptr()) + t.byte_offset();
}

// Strides in elements (tvm-ffi fills them in where a DLPack producer left them out).
std::vector<std::int64_t> strides_of(const ffi::TensorView& t) {
  const ffi::ShapeView strides = t.strides();
  return {strides.begin(), strides.end()};
}

template <class T>
kvbridge::TokenView<T> token_view(const void* data, const ffi::TensorView& t) {
  return {static_cast<const T*>(data), t.shape()[0], t.stride(0)};
}

// A token array as the core's view, read in place: 1-D, in CPU memory, int32 or int64 (or
// uint64, where the function compares it exactly: keep_uint64).
kvbridge::AnyTokens tokens(const ffi::TensorView& t, const char* name, bool keep_uint64) {
  if (t.ndim() != 1) {
    throw NotReadInPlace(std::string(name) + " is not read in place: " + std::to_string(t.ndim()) +
                         " dimensions");
  }
  const void* data = data_of(t, name);
  const DLDataType dtype = t.dtype();
  if (is(dtype, kDLInt, 32)) return token_view<std::int32_t>(data, t);
  if (is(dtype, kDLInt, 64)) return token_view<std::int64_t>(data, t);
  if (keep_uint64 && is(dtype, kDLUInt, 64)) return token_view<std::uint64_t>(data, t);
  throw NotReadInPlace(std::string(name) + " is not read in place: " + dtype_name(dtype));
}

kvbridge::FloatArrayView floats(const ffi::TensorView& t, const char* name) {
  const void* data = data_of(t, name);
  if (!is(t.dtype(), kDLFloat, 32)) {
    throw std::invalid_argument(std::string(name) + " must be float32, got " +
                                dtype_name(t.dtype()));
  }
  const ffi::ShapeView shape = t.shape();
  return {static_cast<const float*>(data), {shape.begin(), shape.end()}, strides_of(t)};
}

// A Buffer the core allocated, owned by the Tensor that lends it out (tvm-ffi's NDAlloc, which
// tvm-ffi copies: shared, the last copy frees it, in FreeData).
struct BufferAlloc {
  std::shared_ptr<kvbridge::Buffer<std::int32_t>> buffer;
  void AllocData(DLTensor* tensor) { tensor->data = buffer->data(); }
  void FreeData(DLTensor* tensor) {
    buffer.reset();
    tensor->data = nullptr;
  }
};

ffi::Tensor adopt(std::unique_ptr<kvbridge::Buffer<std::int32_t>> buffer) {
  const std::int64_t size = static_cast<std::int64_t>(buffer->size());
  return ffi::Tensor::FromNDAlloc(BufferAlloc{std::move(buffer)}, ffi::Shape({size}),
                                  DLDataType{kDLInt, 32, 1}, DLDevice{kDLCPU, 0});
}

// Block ids as a Shape: Python receives a tuple (tvm_ffi.Shape subclasses it), one copy.
ffi::Shape ids_of(const std::vector<kvbridge::BlockId>& ids) {
  return ffi::Shape(std::vector<std::int64_t>(ids.begin(), ids.end()));
}

// --- BlockPool -------------------------------------------------------------------------------

class BlockPoolObj : public ffi::Object {
 public:
  explicit BlockPoolObj(std::int64_t num_blocks) : pool(num_blocks) {}
  kvbridge::BlockPool pool;

  // Methods get a mutable pointer: the core's BlockPool is thread-safe by itself.
  static constexpr bool _type_mutable = true;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("kvbridge.BlockPool", BlockPoolObj, ffi::Object);
};

// counts for allocate_many: the front end passes a contiguous int64 array (_args.py's rule).
const std::int64_t* counts_of(const ffi::TensorView& t) {
  const void* data = data_of(t, "counts");
  // (A stride means nothing for fewer than two elements: numpy exports an empty array's as 0.)
  if (t.ndim() != 1 || !is(t.dtype(), kDLInt, 64) || (t.shape()[0] > 1 && t.stride(0) != 1)) {
    throw std::invalid_argument("counts must be a contiguous 1-D int64 array");
  }
  return static_cast<const std::int64_t*>(data);
}

std::int64_t common_prefix(ffi::TensorView a, ffi::TensorView b) {
  return guarded(
      [&] { return kvbridge::common_prefix(tokens(a, "a", false), tokens(b, "b", false)); });
}

std::int64_t count_eos(ffi::TensorView t, std::int64_t eos) {
  return guarded([&] { return kvbridge::count_eos(tokens(t, "tokens", true), eos); });
}

void rmsnorm(ffi::TensorView x, ffi::TensorView weight, ffi::TensorView out, double eps,
             bool fresh) {
  guarded([&] {
    const kvbridge::FloatArrayView out_view = floats(out, "out");
    kvbridge::rmsnorm(floats(x, "x"), floats(weight, "weight"), eps,
                      const_cast<float*>(out_view.data), out_view.shape,
                      fresh ? kvbridge::Out::kFresh : kvbridge::Out::kExisting);
  });
}

// The core's noexcept counters, as functions tvm-ffi can wrap (it takes no noexcept pointer).
std::int64_t live_buffers() { return kvbridge::live_buffers(); }
std::int64_t live_pools() { return kvbridge::live_pools(); }
std::int64_t get_num_threads() { return kvbridge::get_num_threads(); }
std::int64_t testing_last_num_threads() { return kvbridge::last_num_threads(); }
std::int64_t testing_open_gate() { return kvbridge::testing::open_gate(); }
std::int64_t testing_close_gate() { return kvbridge::testing::close_gate(); }

void testing_arm_gate(double timeout_s) {
  guarded([&] { kvbridge::testing::arm_gate(timeout_s); });
}

void set_num_threads(std::int64_t n) {
  guarded([&] { kvbridge::set_num_threads(n); });
}

std::int64_t default_num_threads() {
  return guarded([] { return kvbridge::default_num_threads(); });
}

void testing_throw(const ffi::String& kind) {
  guarded([&] { kvbridge::testing::throw_kind(std::string(kind)); });
}

// Where count_eos's C++ code reads tokens from (the same input path).
std::int64_t testing_data_address(ffi::TensorView t) {
  return guarded([&] {
    return std::visit([](const auto& v) { return reinterpret_cast<std::int64_t>(v.data); },
                      tokens(t, "tokens", true));
  });
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  using Ref = BlockPoolObj*;
  using Ids = ffi::Optional<ffi::Shape>;
  refl::ObjectDef<BlockPoolObj>()
      .def_static(
          "__ffi_init__",
          [](std::int64_t n) {
            return guarded([&] { return ffi::ObjectRef(ffi::make_object<BlockPoolObj>(n)); });
          })
      .def("num_blocks", [](Ref p) -> std::int64_t { return p->pool.num_blocks(); })
      .def("num_free", [](Ref p) -> std::int64_t { return p->pool.num_free(); })
      .def("allocate",
           [](Ref p, std::int64_t n) {
             return guarded([&]() -> Ids {
               auto ids = p->pool.allocate(n);
               if (!ids) return std::nullopt;
               return ids_of(*ids);
             });
           })
      // All lists' ids in one flat Shape: the front end knows the counts and splits it.
      .def("allocate_many",
           [](Ref p, ffi::TensorView counts) {
             return guarded([&]() -> Ids {
               auto lists = p->pool.allocate_many(counts_of(counts), counts.shape()[0]);
               if (!lists) return std::nullopt;
               std::vector<kvbridge::BlockId> flat;
               for (const auto& l : *lists) flat.insert(flat.end(), l.begin(), l.end());
               return ids_of(flat);
             });
           })
      .def("retain", [](Ref p, std::int64_t b) { guarded([&] { p->pool.retain(b); }); })
      .def("release", [](Ref p, std::int64_t b) { guarded([&] { p->pool.release(b); }); })
      .def("refcount",
           [](Ref p, std::int64_t b) -> std::int64_t {
             return guarded([&] { return p->pool.refcount(b); });
           })
      .def("refcounts", [](Ref p) { return guarded([&] { return adopt(p->pool.refcounts()); }); })
      .def("stats_read",
           [](Ref p) {
             const kvbridge::PoolStats& s = p->pool.stats();
             return ffi::Shape({static_cast<std::int64_t>(s.allocated_total.load()),
                                static_cast<std::int64_t>(s.released_total.load()),
                                static_cast<std::int64_t>(s.peak_in_use.load())});
           })
      .def("stats_repr", [](Ref p) { return ffi::String(p->pool.stats().repr()); })
      .def("__repr__", [](Ref p) { return ffi::String(p->pool.repr()); });
}

// --- functions, threads, testing hooks -------------------------------------------------------

TVM_FFI_DLL_EXPORT_TYPED_FUNC(common_prefix, common_prefix)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(count_eos, count_eos)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm, rmsnorm)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(live_buffers, live_buffers)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(live_pools, live_pools)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_num_threads, set_num_threads)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(get_num_threads, get_num_threads)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(default_num_threads, default_num_threads)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(testing_throw, testing_throw)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(testing_data_address, testing_data_address)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(testing_last_num_threads, testing_last_num_threads)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(testing_arm_gate, testing_arm_gate)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(testing_open_gate, testing_open_gate)
TVM_FFI_DLL_EXPORT_TYPED_FUNC(testing_close_gate, testing_close_gate)
