// kvbridge_torch._C: the kvbridge core as torch operators and custom classes.
//
// One TORCH_LIBRARY block of schemas (schema `int` is int64_t, `float` is double), then the CPU
// implementations and rmsnorm's autograd. Python glue (typed wrappers, fake kernels) lives in
// packages/python/_torch_ops.py and _torch_glue.py.
//
// Errors: every op is registered through tagged() (checks.hpp): a core exception leaves tagged
// with the contract's Python type, which the front end raises, since torch maps the standard
// exceptions as the contract does up to 2.14 and as RuntimeError from 2.15 (the probe table on
// docs/traps.md shows this run's torch). An exception from a custom-class method becomes
// RuntimeError whatever it was, so every pool operation that can throw is an op taking the
// pool, and the class keeps the methods that cannot. Tensor checks use c10's typed
// TORCH_CHECK_TYPE/_VALUE (checks.hpp), which torch maps itself.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <Python.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "checks.hpp"
#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"

namespace {

using kvbridge_torch::check_float_tensor;

// --- BlockPool -----------------------------------------------------------------------------

struct BlockPoolHolder : torch::CustomClassHolder {
  explicit BlockPoolHolder(int64_t num_blocks) : pool(num_blocks) {}
  kvbridge::BlockPool pool;
};

// A custom class cannot hand out a reference into another object, so the stats view holds an
// intrusive_ptr to its pool: the pool lives as long as any view of its counters.
struct PoolStatsHolder : torch::CustomClassHolder {
  explicit PoolStatsHolder(c10::intrusive_ptr<BlockPoolHolder> owner) : owner(std::move(owner)) {}
  const kvbridge::PoolStats& stats() const { return owner->pool.stats(); }
  c10::intrusive_ptr<BlockPoolHolder> owner;
};

// How torch::class_ methods receive their object.
using Pool = c10::intrusive_ptr<BlockPoolHolder>;
using Stats = c10::intrusive_ptr<PoolStatsHolder>;

std::optional<std::vector<int64_t>> widen(
    const std::optional<std::vector<kvbridge::BlockId>>& ids) {
  if (!ids) return std::nullopt;
  return std::vector<int64_t>(ids->begin(), ids->end());
}

// A method's fast path (see BlockPool below): the call's answer, or `refused` where the core
// throws. The one catch of the methods: the op behind each refusal raises the contract's type.
template <class Answer, class Call>
Answer or_refused(Answer refused, Call&& call) noexcept {
  try {
    return call();
  } catch (...) {
    return refused;
  }
}

// refcounts(): a tensor over the C++ buffer, freed exactly once by from_blob's deleter.
at::Tensor adopt(std::unique_ptr<kvbridge::Buffer<int32_t>> buffer) {
  auto* raw = buffer.get();
  auto tensor = at::from_blob(
      raw->data(), {static_cast<int64_t>(raw->size())}, [raw](void*) { delete raw; },
      at::TensorOptions().dtype(at::kInt));
  buffer.release();  // the tensor's storage owns it now
  return tensor;
}

// --- functions: token kernels ---------------------------------------------------------------

// "(2, 3)", "(5,)", "()": shapes as Python prints them, so messages match the other packages.
std::string shape_text(c10::IntArrayRef sizes) {
  std::string text = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    text += std::to_string(sizes[i]) + (sizes.size() == 1 ? "," : i + 1 < sizes.size() ? ", " : "");
  }
  return text + ")";
}

// A 1-D CPU integer tensor as the core's view. int32/int64 (and uint64 where `keep_uint64`: the
// exact comparison count_eos needs) are read in place with their stride; other integer dtypes are
// converted to int64 first, and the converted tensor lives until `body` returns. Every check the
// contract needs happens here, so the Python wrapper can hand tensors straight through.
template <class F>
auto with_tokens(const at::Tensor& t, const char* name, bool keep_uint64, F&& body) {
  const auto dtype = t.scalar_type();
  TORCH_CHECK_TYPE(at::isIntegralType(dtype, /*includeBool=*/false), name,
                   " must have an integer dtype, got torch.", c10::getDtypeNames(dtype).first);
  TORCH_CHECK_VALUE(t.dim() == 1, name, " must be 1-D, got shape ", shape_text(t.sizes()));
  TORCH_CHECK_VALUE(t.device().is_cpu(), name, " must be on the CPU, got ", t.device());
  if (dtype == at::kInt) {
    return body(kvbridge::TokenView<int32_t>{t.const_data_ptr<int32_t>(), t.size(0), t.stride(0)});
  }
  if (dtype == at::kUInt64 && keep_uint64) {
    return body(kvbridge::TokenView<uint64_t>{static_cast<const uint64_t*>(t.const_data_ptr()),
                                              t.size(0), t.stride(0)});
  }
  const at::Tensor wide = dtype == at::kLong ? t : t.to(at::kLong);
  return body(
      kvbridge::TokenView<int64_t>{wide.const_data_ptr<int64_t>(), wide.size(0), wide.stride(0)});
}

int64_t common_prefix(const at::Tensor& a, const at::Tensor& b) {
  return with_tokens(a, "a", false, [&](auto va) {
    return with_tokens(b, "b", false, [&](auto vb) -> int64_t {
      using A = std::decay_t<decltype(*va.data)>;
      using B = std::decay_t<decltype(*vb.data)>;
      if constexpr (std::is_same_v<A, uint64_t> || std::is_same_v<B, uint64_t>) {
        TORCH_INTERNAL_ASSERT(false, "unreachable: with_tokens converts uint64 here");
        return 0;
      } else {
        return kvbridge::common_prefix(va, vb);
      }
    });
  });
}

int64_t count_eos(const at::Tensor& tokens, int64_t eos) {
  return with_tokens(tokens, "tokens", true, [&](auto v) { return kvbridge::count_eos(v, eos); });
}

int64_t data_address(const at::Tensor& tokens) {
  return with_tokens(tokens, "tokens", true,
                     [](auto v) { return reinterpret_cast<int64_t>(v.data); });
}

// A batch arrives as a tensor and is checked like tokens: the same dtype and shape errors, named
// "counts".
std::optional<std::vector<std::vector<int64_t>>> allocate_many(const Pool& self,
                                                               const at::Tensor& batch) {
  const std::vector<int64_t> counts = with_tokens(batch, "counts", false, [](auto v) {
    std::vector<int64_t> out(v.size);
    for (int64_t i = 0; i < v.size; ++i) out[i] = static_cast<int64_t>(v.data[i * v.stride]);
    return out;
  });
  auto got = self->pool.allocate_many(counts.data(), counts.size());
  if (!got) return std::nullopt;
  std::vector<std::vector<int64_t>> out;
  for (const auto& ids : *got) out.push_back(*widen(ids));
  return out;
}

// --- functions: rmsnorm ----------------------------------------------------------------------

kvbridge::FloatArrayView float_view(const at::Tensor& t) {
  return {t.const_data_ptr<float>(), t.sizes().vec(), t.strides().vec()};
}

kvbridge::HalfArrayView half_view(const at::Tensor& t) {
  return {static_cast<const std::uint16_t*>(t.const_data_ptr()), t.sizes().vec(),
          t.strides().vec()};
}

// CPU: every dtype is read in place with any strides. bfloat16/float16 run the core's 16-bit
// kernel (float32 math on values widened in registers); their weight is widened to float32 first
// (one row). `out` is an existing tensor, or none: the core then checks the arguments before it
// asks for a fresh one.
at::Tensor rmsnorm_cpu_into(const at::Tensor& x, const at::Tensor& weight, double eps,
                            const std::optional<at::Tensor>& out) {
  if (out) {
    kvbridge_torch::check_rmsnorm_out(x, weight, *out);  // every type before any shape
  } else {
    check_float_tensor(x, "x");
    check_float_tensor(weight, "weight");
  }
  const at::Tensor wf = weight.scalar_type() == at::kFloat ? weight : weight.to(at::kFloat);
  at::Tensor fresh;
  auto allocate = [&](const std::vector<int64_t>& shape) {
    fresh = at::empty(shape, x.options().memory_format(at::MemoryFormat::Contiguous));
    return fresh.mutable_data_ptr();
  };
  if (x.scalar_type() == at::kFloat) {
    if (out) {
      kvbridge::rmsnorm(float_view(x), float_view(wf), eps, out->mutable_data_ptr<float>(),
                        out->sizes().vec());
    } else {
      kvbridge::rmsnorm(float_view(x), float_view(wf), eps,
                        [&](const auto& shape) { return static_cast<float*>(allocate(shape)); });
    }
  } else {
    const auto format =
        x.scalar_type() == at::kBFloat16 ? kvbridge::Half::kBFloat16 : kvbridge::Half::kFloat16;
    if (out) {
      kvbridge::rmsnorm_half(format, half_view(x), float_view(wf), eps,
                             static_cast<std::uint16_t*>(out->mutable_data_ptr()),
                             out->sizes().vec());
    } else {
      kvbridge::rmsnorm_half(format, half_view(x), float_view(wf), eps, [&](const auto& shape) {
        return static_cast<std::uint16_t*>(allocate(shape));
      });
    }
  }
  return out ? *out : fresh;
}

at::Tensor& rmsnorm_out_cpu(const at::Tensor& x, const at::Tensor& weight, double eps,
                            at::Tensor& out) {
  rmsnorm_cpu_into(x, weight, eps, out);
  return out;
}

at::Tensor rmsnorm_cpu(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return rmsnorm_cpu_into(x, weight, eps, std::nullopt);
}

std::tuple<at::Tensor, at::Tensor> rmsnorm_backward_cpu(const at::Tensor& grad, const at::Tensor& x,
                                                        const at::Tensor& weight, double eps) {
  const int64_t cols = x.size(-1);
  const at::Tensor xf = x.to(at::kFloat).contiguous(), wf = weight.to(at::kFloat).contiguous();
  const at::Tensor gf = grad.to(at::kFloat).contiguous();
  at::Tensor grad_x = at::empty(xf.sizes(), xf.options());
  at::Tensor grad_w = at::empty({cols}, xf.options());
  kvbridge::rmsnorm_backward(xf.const_data_ptr<float>(), wf.const_data_ptr<float>(),
                             gf.const_data_ptr<float>(), cols == 0 ? 0 : xf.numel() / cols, cols,
                             eps, grad_x.mutable_data_ptr<float>(),
                             grad_w.mutable_data_ptr<float>());
  return std::make_tuple(grad_x.to(x.scalar_type()), grad_w.to(weight.scalar_type()));
}

// rmsnorm's autograd, in C++: registered from Python (torch.library.register_autograd, as the
// stable-ABI package must) it runs Python in every call, gradients wanted or not: the op called
// bare on a 1x4096 float32 x took 6.4 us so, 2.4 us with this (Xeon, torch 2.13, one thread).
// Past the Autograd key the op runs as any other: the fake kernel (Python) under torch.compile,
// the CPU or CUDA kernel for real.
const auto& rmsnorm_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kvbridge::rmsnorm", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return op;
}

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, double eps) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    return rmsnorm_op().call(x, weight, eps);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("kvbridge::rmsnorm_backward", "")
            .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                      const at::Tensor&, double)>();
    const auto saved = ctx->get_saved_variables();
    auto [grad_x, grad_weight] =
        op.call(grads[0], saved[0], saved[1], ctx->saved_data["eps"].toDouble());
    return {grad_x, grad_weight, at::Tensor()};  // eps: none
  }
};

at::Tensor rmsnorm_autograd(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (!at::GradMode::is_enabled() || !(x.requires_grad() || weight.requires_grad())) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;  // no graph to record: the kernel
    return rmsnorm_op().call(x, weight, eps);
  }
  return RmsNormFunction::apply(x, weight, eps);
}

// --- threads -------------------------------------------------------------------------------

// The core's kernels run their chunks on torch's intra-op pool, so torch.set_num_threads
// governs them like every other torch op (and no second pool competes with torch's).
void torch_parallel_for(int64_t n, int64_t grain, const kvbridge::ChunkBody& body) {
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { body(begin, end); });
}

const bool g_backend_set = (kvbridge::set_parallel_backend(&torch_parallel_for), true);

}  // namespace

TORCH_LIBRARY(kvbridge, m) {
  // PoolStats first: BlockPool.stats() returns it, and a schema can only name a known class.
  m.class_<PoolStatsHolder>("PoolStats")
      .def("allocated_total",
           [](const Stats& self) -> int64_t { return self->stats().allocated_total.load(); })
      .def("released_total",
           [](const Stats& self) -> int64_t { return self->stats().released_total.load(); })
      .def("peak_in_use",
           [](const Stats& self) -> int64_t { return self->stats().peak_in_use.load(); })
      .def("repr", [](const Stats& self) { return self->stats().repr(); });

  // torch maps a core exception raised in an op to the contract's type, but one raised in a
  // custom-class method to RuntimeError whatever its kind (probed: docs/comparison.md). So a
  // method never throws. The pool calls that can be refused have a method as their fast path
  // (a method call costs a fraction of an op call that takes the pool, a ScriptObject
  // argument): a call the core refuses changes nothing and answers "refused" (-1, false, or
  // (false, None)), and _torch_ops.py then makes the same call through its op, whose exception has
  // the contract's type: the package's one error path. The op's call is the one that counts,
  // so a refusal and a retry never apply a call twice.
  m.class_<BlockPoolHolder>("BlockPool")
      .def("num_blocks", [](const Pool& self) -> int64_t { return self->pool.num_blocks(); })
      .def("num_free", [](const Pool& self) -> int64_t { return self->pool.num_free(); })
      .def("try_allocate",
           [](const Pool& self, int64_t n) {
             return or_refused(std::tuple<bool, std::optional<std::vector<int64_t>>>{false, {}},
                               [&] { return std::tuple{true, widen(self->pool.allocate(n))}; });
           })
      .def("try_retain",
           [](const Pool& self, int64_t b) {
             return or_refused(false, [&] {
               self->pool.retain(b);
               return true;
             });
           })
      .def("try_release",
           [](const Pool& self, int64_t b) {
             return or_refused(false, [&] {
               self->pool.release(b);
               return true;
             });
           })
      .def("try_refcount",
           [](const Pool& self, int64_t b) {
             return or_refused(int64_t{-1}, [&]() -> int64_t { return self->pool.refcount(b); });
           })
      .def("stats", [](const Pool& self) { return c10::make_intrusive<PoolStatsHolder>(self); })
      .def("repr", [](const Pool& self) { return self->pool.repr(); });

#define KVB_POOL "__torch__.torch.classes.kvbridge.BlockPool"
  m.def("pool_create(int num_blocks) -> " KVB_POOL,
        kvbridge_torch::tagged([](int64_t n) { return c10::make_intrusive<BlockPoolHolder>(n); }));
  m.def("pool_allocate(" KVB_POOL " pool, int n) -> int[]?",
        kvbridge_torch::tagged(
            [](const Pool& self, int64_t n) { return widen(self->pool.allocate(n)); }));
  m.def("pool_allocate_many(" KVB_POOL " pool, Tensor counts) -> int[][]?",
        kvbridge_torch::tagged(&allocate_many));
  m.def("pool_retain(" KVB_POOL " pool, int block) -> ()",
        kvbridge_torch::tagged([](const Pool& self, int64_t b) { self->pool.retain(b); }));
  m.def("pool_release(" KVB_POOL " pool, int block) -> ()",
        kvbridge_torch::tagged([](const Pool& self, int64_t b) { self->pool.release(b); }));
  m.def("pool_refcount(" KVB_POOL " pool, int block) -> int",
        kvbridge_torch::tagged(
            [](const Pool& self, int64_t b) -> int64_t { return self->pool.refcount(b); }));
  m.def("pool_refcounts(" KVB_POOL " pool) -> Tensor",
        kvbridge_torch::tagged([](const Pool& self) { return adopt(self->pool.refcounts()); }));
#undef KVB_POOL

  m.def("common_prefix(Tensor a, Tensor b) -> int", kvbridge_torch::tagged(&common_prefix));
  m.def("count_eos(Tensor tokens, int eos) -> int", kvbridge_torch::tagged(&count_eos));
  m.def("rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("rmsnorm.out(Tensor x, Tensor weight, float eps, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("rmsnorm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("live_buffers() -> int", kvbridge_torch::tagged([] { return kvbridge::live_buffers(); }));
  m.def("live_pools() -> int", kvbridge_torch::tagged([] { return kvbridge::live_pools(); }));
  m.def("set_num_threads(int n) -> ()", kvbridge_torch::tagged([](int64_t n) {
          at::set_num_threads(static_cast<int>(kvbridge::check_num_threads(n)));
        }));
  m.def("get_num_threads() -> int",
        kvbridge_torch::tagged([]() -> int64_t { return at::get_num_threads(); }));
  m.def("throw_kind(str kind) -> ()", kvbridge_torch::tagged([](const std::string& kind) {
          kvbridge::testing::throw_kind(kind);
        }));
  m.def("data_address(Tensor tokens) -> int", kvbridge_torch::tagged(&data_address));
  m.def("last_num_threads() -> int",
        kvbridge_torch::tagged([] { return kvbridge::last_num_threads(); }));
  m.def("arm_gate(float timeout_s) -> ()",
        kvbridge_torch::tagged([](double t) { kvbridge::testing::arm_gate(t); }));
  m.def("open_gate() -> int",
        kvbridge_torch::tagged([]() -> int64_t { return kvbridge::testing::open_gate(); }));
  m.def("close_gate() -> int",
        kvbridge_torch::tagged([]() -> int64_t { return kvbridge::testing::close_gate(); }));
  m.def("rmsnorm_paths() -> str", kvbridge_torch::tagged([] { return kvbridge::rmsnorm_paths(); }));
}

TORCH_LIBRARY_IMPL(kvbridge, CPU, m) {
  m.impl("rmsnorm", kvbridge_torch::tagged(&rmsnorm_cpu));
  m.impl("rmsnorm.out", kvbridge_torch::tagged(&rmsnorm_out_cpu));
  m.impl("rmsnorm_backward", kvbridge_torch::tagged(&rmsnorm_backward_cpu));
}

TORCH_LIBRARY_IMPL(kvbridge, Autograd, m) { m.impl("rmsnorm", &rmsnorm_autograd); }

// An importable module that only loads the library above (registration runs at load time).
PyMODINIT_FUNC PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  PyObject* m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
  // Runs without the GIL on a free-threaded Python: the ops hold no Python state, the core has
  // its own locks (built and tested only where a free-threaded torch exists).
  if (m != nullptr) PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
  return m;
}
