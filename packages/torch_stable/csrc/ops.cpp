// libkvbridge_torch_stable.so: the kvbridge core as torch operators, registered through the
// LibTorch stable ABI only (STABLE_TORCH_LIBRARY, torch::stable::Tensor, TORCH_BOX), so one
// build loads into every torch from TORCH_TARGET_VERSION on (CMakeLists.txt sets it; a shim
// newer than that is a compile error). A plain shared library, loaded with
// torch.ops.load_library: no CPython extension module, so no Python version is built in.
//
// What the stable ABI gives and does not, and what this file does about it:
//  - no custom classes (torch::class_): a BlockPool is a handle, an int64 this library hands
//    out and owns (`Pools` below). Handles are never reused, so a freed or unknown one is
//    always recognised: std::invalid_argument, the contract's ValueError, never a crash.
//  - no c10 exception types, and no promise about what a standard one becomes: torch 2.13
//    and 2.14 let it through to the Python type the contract names, torch 2.15 turns every
//    exception out of a stable-ABI kernel into RuntimeError (seen: torch_stable-torch2150).
//    So every kernel is registered through KVB_BOX (below): the core's one catch chain sorts
//    what it throws, and it leaves as std::runtime_error("[<Python type>] <message>"), which
//    the front end raises as that type on every torch alike (packages/python/_torch_ops.py,
//    `_torch_glue.reraise`).
//    A TypeError cannot be thrown from here at all, so the Python front end checks every
//    argument's type before a call, and rmsnorm's dtypes (the check below is a second line
//    that names the same values, never reached through it). A token tensor's dtype is checked
//    here, first: one this library does not read in place leaves tagged "[NotReadInPlace]"
//    (`NotReadInPlace`), and the front end converts it or raises the contract's TypeError,
//    then calls again, so the per-step calls read no dtype in Python.
//  - no at::set_num_threads: the front end calls torch.set_num_threads, after the core's
//    check of n (check_num_threads below). Kernels run on torch's intra-op pool through
//    torch::stable::parallel_for, compiled inside libtorch, so no OpenMP flag is needed here.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvbridge/errors.hpp"
#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// --- BlockPool handles -------------------------------------------------------------------------

// Every live pool, by handle. A call takes a shared_ptr to its pool under the lock and works on
// it after the lock is released: pool_destroy from another thread then frees the pool when that
// call is done, not under it. The core's own mutex makes concurrent calls on one pool safe.
class Pools {
 public:
  std::int64_t create(std::int64_t num_blocks) {
    auto pool = std::make_shared<kvbridge::BlockPool>(num_blocks);  // throws before a handle
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::int64_t handle = next_++;
    pools_.emplace(handle, std::move(pool));
    return handle;
  }

  std::shared_ptr<kvbridge::BlockPool> get(std::int64_t handle) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = pools_.find(handle);
    if (it == pools_.end()) throw unknown(handle);
    return it->second;
  }

  void destroy(std::int64_t handle) {
    std::shared_ptr<kvbridge::BlockPool> last;  // freed after the lock is released
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = pools_.find(handle);
    if (it == pools_.end()) throw unknown(handle);
    last = std::move(it->second);
    pools_.erase(it);
  }

 private:
  static std::invalid_argument unknown(std::int64_t handle) {
    return std::invalid_argument("pool=" + std::to_string(handle) +
                                 " is not a live BlockPool handle (freed, or never created)");
  }

  mutable std::mutex mutex_;
  std::unordered_map<std::int64_t, std::shared_ptr<kvbridge::BlockPool>> pools_;
  std::int64_t next_ = 1;  // 0 is never a handle
};

Pools& pools() {
  static Pools* const all = new Pools();  // never destroyed: no exit-order race with a call
  return *all;
}

std::optional<std::vector<std::int64_t>> widen(
    const std::optional<std::vector<kvbridge::BlockId>>& ids) {
  if (!ids) return std::nullopt;
  return std::vector<std::int64_t>(ids->begin(), ids->end());
}

// refcounts(): a tensor over the core's buffer, freed exactly once by from_blob's deleter.
Tensor adopt(std::unique_ptr<kvbridge::Buffer<std::int32_t>> buffer) {
  auto* raw = buffer.get();
  const std::vector<std::int64_t> sizes{static_cast<std::int64_t>(raw->size())}, strides{1};
  Tensor tensor = torch::stable::from_blob(raw->data(), sizes, strides,
                                           torch::stable::Device(torch::headeronly::kCPU),
                                           ScalarType::Int, [raw](void*) { delete raw; });
  buffer.release();  // the tensor's storage owns it now
  return tensor;
}

std::int64_t pool_create(std::int64_t num_blocks) { return pools().create(num_blocks); }
void pool_destroy(std::int64_t pool) { pools().destroy(pool); }
std::int64_t pool_num_blocks(std::int64_t pool) { return pools().get(pool)->num_blocks(); }
std::int64_t pool_num_free(std::int64_t pool) { return pools().get(pool)->num_free(); }
std::optional<std::vector<std::int64_t>> pool_allocate(std::int64_t pool, std::int64_t n) {
  return widen(pools().get(pool)->allocate(n));
}
void pool_retain(std::int64_t pool, std::int64_t block) { pools().get(pool)->retain(block); }
void pool_release(std::int64_t pool, std::int64_t block) { pools().get(pool)->release(block); }
std::int64_t pool_refcount(std::int64_t pool, std::int64_t block) {
  return pools().get(pool)->refcount(block);
}
Tensor pool_refcounts(std::int64_t pool) { return adopt(pools().get(pool)->refcounts()); }
std::string pool_repr(std::int64_t pool) { return pools().get(pool)->repr(); }

// The counters, each read lock-free as the other packages' live views read them.
std::vector<std::int64_t> pool_stats(std::int64_t pool) {
  const auto owner = pools().get(pool);
  const kvbridge::PoolStats& s = owner->stats();
  return {s.allocated_total.load(), s.released_total.load(), s.peak_in_use.load()};
}
std::string pool_stats_repr(std::int64_t pool) { return pools().get(pool)->stats().repr(); }

// --- tensors -----------------------------------------------------------------------------------

// "(2, 3)", "(5,)", "()": shapes as Python prints them, so messages match the other packages.
std::string shape_text(const Tensor& t) {
  std::string text = "(";
  for (std::int64_t i = 0; i < t.dim(); ++i) {
    text += std::to_string(t.size(i)) + (t.dim() == 1 ? "," : i + 1 < t.dim() ? ", " : "");
  }
  return text + ")";
}

void require_cpu(const Tensor& t, const char* name) {
  if (!t.is_cpu()) throw std::invalid_argument(std::string(name) + " must be on the CPU");
}

// A token tensor of a dtype this library does not read in place: never a user's error. It leaves
// as "[NotReadInPlace] <name>" (Tagged, below), and the front end answers it by the contract's
// rule (_torch_ops.py: convert the tensor, or raise TypeError) and calls again.
struct NotReadInPlace {
  const char* name;
};

// A 1-D CPU token tensor as the core's view, read in place with its stride: int32, int64 or
// (for count_eos) uint64. Its dtype first: the contract reports a wrong type before a shape.
kvbridge::AnyTokens tokens(const Tensor& t, const char* name, bool keep_uint64) {
  const ScalarType dtype = t.scalar_type();
  if (dtype != ScalarType::Int && dtype != ScalarType::Long &&
      !(keep_uint64 && dtype == ScalarType::UInt64)) {
    throw NotReadInPlace{name};
  }
  if (t.dim() != 1) {
    throw std::invalid_argument(std::string(name) + " must be 1-D, got shape " + shape_text(t));
  }
  require_cpu(t, name);
  const void* data = t.const_data_ptr();
  switch (dtype) {
    case ScalarType::Int:
      return kvbridge::TokenView<std::int32_t>{static_cast<const std::int32_t*>(data), t.size(0),
                                               t.stride(0)};
    case ScalarType::Long:
      return kvbridge::TokenView<std::int64_t>{static_cast<const std::int64_t*>(data), t.size(0),
                                               t.stride(0)};
    default:  // uint64, compared exactly
      return kvbridge::TokenView<std::uint64_t>{static_cast<const std::uint64_t*>(data), t.size(0),
                                                t.stride(0)};
  }
}

std::int64_t common_prefix(Tensor a, Tensor b) {
  return kvbridge::common_prefix(tokens(a, "a", false), tokens(b, "b", false));
}

std::int64_t count_eos(Tensor t, std::int64_t eos) {
  return kvbridge::count_eos(tokens(t, "tokens", true), eos);
}

std::int64_t data_address(Tensor t) {
  return std::visit([](auto v) { return reinterpret_cast<std::int64_t>(v.data); },
                    tokens(t, "tokens", true));
}

// A batch arrives as a 1-D int64 tensor (the front end converts it) and is checked as tokens.
std::optional<std::vector<std::vector<std::int64_t>>> pool_allocate_many(std::int64_t pool,
                                                                         Tensor batch) {
  const auto view = tokens(batch, "counts", false);
  std::vector<std::int64_t> counts;
  std::visit(
      [&](auto v) {
        for (std::int64_t i = 0; i < v.size; ++i) counts.push_back(v.data[i * v.stride]);
      },
      view);
  auto got = pools().get(pool)->allocate_many(counts.data(), counts.size());
  if (!got) return std::nullopt;
  std::vector<std::vector<std::int64_t>> out;
  for (const auto& ids : *got) out.push_back(*widen(ids));
  return out;
}

// --- rmsnorm -----------------------------------------------------------------------------------

bool is_float(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::BFloat16 || t == ScalarType::Half;
}

std::vector<std::int64_t> vec(torch::headeronly::IntHeaderOnlyArrayRef values) {
  return {values.begin(), values.end()};
}

kvbridge::FloatArrayView float_view(const Tensor& t) {
  return {static_cast<const float*>(t.const_data_ptr()), vec(t.sizes()), vec(t.strides())};
}

kvbridge::HalfArrayView half_view(const Tensor& t) {
  return {static_cast<const std::uint16_t*>(t.const_data_ptr()), vec(t.sizes()), vec(t.strides())};
}

// Every dtype is read in place with any strides; the 16-bit formats run the core's 16-bit
// kernel with their weight widened to float32 first (one row). `out` is an existing tensor or
// none: the core then checks every argument before it asks for a fresh one.
Tensor rmsnorm_into(const Tensor& x, const Tensor& weight, double eps,
                    const std::optional<Tensor>& out) {
  if (!is_float(x.scalar_type()) || !is_float(weight.scalar_type()) ||
      (out && out->scalar_type() != x.scalar_type())) {
    throw std::invalid_argument("x, weight and out must be float32, bfloat16 or float16 alike");
  }
  require_cpu(x, "x");
  require_cpu(weight, "weight");
  if (out) {
    require_cpu(*out, "out");
    if (!out->is_contiguous()) {
      throw std::invalid_argument("out must be a writeable C-contiguous array");
    }
  }
  const Tensor wf = weight.scalar_type() == ScalarType::Float
                        ? weight
                        : torch::stable::to(weight, ScalarType::Float);
  std::optional<Tensor> fresh;
  auto allocate = [&](const std::vector<std::int64_t>& shape) {
    fresh = torch::stable::empty(shape, x.scalar_type(), std::nullopt,
                                 torch::stable::Device(torch::headeronly::kCPU));
    return fresh->mutable_data_ptr();
  };
  if (x.scalar_type() == ScalarType::Float) {
    if (out) {
      kvbridge::rmsnorm(float_view(x), float_view(wf), eps,
                        static_cast<float*>(out->mutable_data_ptr()), vec(out->sizes()));
    } else {
      kvbridge::rmsnorm(float_view(x), float_view(wf), eps,
                        [&](const auto& shape) { return static_cast<float*>(allocate(shape)); });
    }
  } else {
    const auto format = x.scalar_type() == ScalarType::BFloat16 ? kvbridge::Half::kBFloat16
                                                                : kvbridge::Half::kFloat16;
    if (out) {
      kvbridge::rmsnorm_half(format, half_view(x), float_view(wf), eps,
                             static_cast<std::uint16_t*>(out->mutable_data_ptr()),
                             vec(out->sizes()));
    } else {
      kvbridge::rmsnorm_half(format, half_view(x), float_view(wf), eps, [&](const auto& shape) {
        return static_cast<std::uint16_t*>(allocate(shape));
      });
    }
  }
  return out ? *out : *fresh;
}

Tensor rmsnorm(Tensor x, Tensor weight, double eps) {
  return rmsnorm_into(x, weight, eps, std::nullopt);
}

Tensor rmsnorm_out(Tensor x, Tensor weight, double eps, Tensor out) {
  return rmsnorm_into(x, weight, eps, out);
}

std::tuple<Tensor, Tensor> rmsnorm_backward(Tensor grad, Tensor x, Tensor weight, double eps) {
  const std::int64_t cols = x.size(x.dim() - 1);
  auto float32 = [](const Tensor& t) {
    return torch::stable::contiguous(torch::stable::to(t, ScalarType::Float));
  };
  const Tensor xf = float32(x), wf = float32(weight), gf = float32(grad);
  const auto cpu = torch::stable::Device(torch::headeronly::kCPU);
  Tensor grad_x = torch::stable::empty(vec(xf.sizes()), ScalarType::Float, std::nullopt, cpu);
  Tensor grad_w = torch::stable::empty({cols}, ScalarType::Float, std::nullopt, cpu);
  kvbridge::rmsnorm_backward(static_cast<const float*>(xf.const_data_ptr()),
                             static_cast<const float*>(wf.const_data_ptr()),
                             static_cast<const float*>(gf.const_data_ptr()),
                             cols == 0 ? 0 : xf.numel() / cols, cols, eps,
                             static_cast<float*>(grad_x.mutable_data_ptr()),
                             static_cast<float*>(grad_w.mutable_data_ptr()));
  return {torch::stable::to(grad_x, x.scalar_type()),
          torch::stable::to(grad_w, weight.scalar_type())};
}

// --- threads and testing hooks -----------------------------------------------------------------

// The core's kernels run their chunks on torch's intra-op pool, so torch.set_num_threads
// governs them like every other torch op (and no second pool competes with torch's).
void torch_parallel_for(std::int64_t n, std::int64_t grain, const kvbridge::ChunkBody& body) {
  torch::stable::parallel_for(0, n, grain,
                              [&](std::int64_t begin, std::int64_t end) { body(begin, end); });
}

const bool g_backend_set = (kvbridge::set_parallel_backend(&torch_parallel_for), true);

std::int64_t check_num_threads(std::int64_t n) { return kvbridge::check_num_threads(n); }
std::int64_t get_num_threads() { return torch::stable::get_num_threads(); }
std::int64_t live_buffers() { return kvbridge::live_buffers(); }
std::int64_t live_pools() { return kvbridge::live_pools(); }
std::int64_t last_num_threads() { return kvbridge::last_num_threads(); }
std::string rmsnorm_paths() { return kvbridge::rmsnorm_paths(); }
void throw_kind(std::string kind) { kvbridge::testing::throw_kind(kind); }
void arm_gate(double timeout_s) { kvbridge::testing::arm_gate(timeout_s); }
std::int64_t open_gate() { return kvbridge::testing::open_gate(); }
std::int64_t close_gate() { return kvbridge::testing::close_gate(); }

}  // namespace

// --- the one error path ------------------------------------------------------------------------

// A kernel whose exceptions leave tagged with their Python type (kvbridge::rethrow_tagged), or,
// for a token tensor it does not read in place, "[NotReadInPlace]".
template <auto F>
struct Tagged;
template <typename R, typename... Args, R (*F)(Args...)>
struct Tagged<F> {
  static R call(Args... args) {
    try {
      return F(std::forward<Args>(args)...);
    } catch (const NotReadInPlace& refused) {
      throw std::runtime_error(std::string("[NotReadInPlace] ") + refused.name);
    } catch (...) {
      kvbridge::rethrow_tagged();
    }
  }
};

// TORCH_BOX of a kernel whose exceptions leave tagged: the only way this file registers one.
#define KVB_BOX(fn) TORCH_BOX(&Tagged<&fn>::call)

// The schemas of the classic package's ops (docs/contract.md), with an int handle where the
// classic ones take the custom class.
STABLE_TORCH_LIBRARY(kvbridge_stable, m) {
  m.def("pool_create(int num_blocks) -> int");
  m.def("pool_destroy(int pool) -> ()");
  m.def("pool_num_blocks(int pool) -> int");
  m.def("pool_num_free(int pool) -> int");
  m.def("pool_allocate(int pool, int n) -> int[]?");
  m.def("pool_allocate_many(int pool, Tensor counts) -> int[][]?");
  m.def("pool_retain(int pool, int block) -> ()");
  m.def("pool_release(int pool, int block) -> ()");
  m.def("pool_refcount(int pool, int block) -> int");
  m.def("pool_refcounts(int pool) -> Tensor");
  m.def("pool_stats(int pool) -> int[]");
  m.def("pool_repr(int pool) -> str");
  m.def("pool_stats_repr(int pool) -> str");
  m.def("common_prefix(Tensor a, Tensor b) -> int");
  m.def("count_eos(Tensor tokens, int eos) -> int");
  m.def("rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("rmsnorm.out(Tensor x, Tensor weight, float eps, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("rmsnorm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("live_buffers() -> int");
  m.def("live_pools() -> int");
  m.def("check_num_threads(int n) -> int");
  m.def("get_num_threads() -> int");
  m.def("throw_kind(str kind) -> ()");
  m.def("data_address(Tensor tokens) -> int");
  m.def("last_num_threads() -> int");
  m.def("arm_gate(float timeout_s) -> ()");
  m.def("open_gate() -> int");
  m.def("close_gate() -> int");
  m.def("rmsnorm_paths() -> str");
}

// Ops with no tensor, or whose tensors are only read as tokens, run for every dispatch key:
// a tensor on another device reaches the device check above, as in the classic package.
STABLE_TORCH_LIBRARY_IMPL(kvbridge_stable, CompositeExplicitAutograd, m) {
  m.impl("pool_create", KVB_BOX(pool_create));
  m.impl("pool_destroy", KVB_BOX(pool_destroy));
  m.impl("pool_num_blocks", KVB_BOX(pool_num_blocks));
  m.impl("pool_num_free", KVB_BOX(pool_num_free));
  m.impl("pool_allocate", KVB_BOX(pool_allocate));
  m.impl("pool_allocate_many", KVB_BOX(pool_allocate_many));
  m.impl("pool_retain", KVB_BOX(pool_retain));
  m.impl("pool_release", KVB_BOX(pool_release));
  m.impl("pool_refcount", KVB_BOX(pool_refcount));
  m.impl("pool_refcounts", KVB_BOX(pool_refcounts));
  m.impl("pool_stats", KVB_BOX(pool_stats));
  m.impl("pool_repr", KVB_BOX(pool_repr));
  m.impl("pool_stats_repr", KVB_BOX(pool_stats_repr));
  m.impl("common_prefix", KVB_BOX(common_prefix));
  m.impl("count_eos", KVB_BOX(count_eos));
  m.impl("live_buffers", KVB_BOX(live_buffers));
  m.impl("live_pools", KVB_BOX(live_pools));
  m.impl("check_num_threads", KVB_BOX(check_num_threads));
  m.impl("get_num_threads", KVB_BOX(get_num_threads));
  m.impl("throw_kind", KVB_BOX(throw_kind));
  m.impl("data_address", KVB_BOX(data_address));
  m.impl("last_num_threads", KVB_BOX(last_num_threads));
  m.impl("arm_gate", KVB_BOX(arm_gate));
  m.impl("open_gate", KVB_BOX(open_gate));
  m.impl("close_gate", KVB_BOX(close_gate));
  m.impl("rmsnorm_paths", KVB_BOX(rmsnorm_paths));
}

// rmsnorm's kernels are the CPU's; its fake kernel and autograd are registered from Python.
STABLE_TORCH_LIBRARY_IMPL(kvbridge_stable, CPU, m) {
  m.impl("rmsnorm", KVB_BOX(rmsnorm));
  m.impl("rmsnorm.out", KVB_BOX(rmsnorm_out));
  m.impl("rmsnorm_backward", KVB_BOX(rmsnorm_backward));
}
