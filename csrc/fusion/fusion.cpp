#include "fusion/fusion.h"

#include "executor/signature.h"
#include "queue/held_errors.h"

#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace py = pybind11;

namespace localneuron {
namespace {

// Set by set_fusion from the environment table (localneuron/runtime/environment.py holds the defaults)
// before any op is queued; nothing reads them while g_enabled is false. Atomics because workers read them.
std::atomic<bool> g_enabled{false};
std::atomic<size_t> g_run_limit{0};      // TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT
std::atomic<size_t> g_low_threshold{0};  // TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD
std::atomic<bool> g_skip_intermediate{false};  // TORCH_NEURONX_APPLY_SKIP_INTERMEDIATE

// A run signature is compiled the second time it is seen: a run that occurs once (one prompt's
// shapes) never pays for a compile.
constexpr int kCompileAtSighting = 2;

// Installed once, before any op is queued: the allow-list, and its entries restricted to float32
// (whatever the operands) or to float32 when a Python number is among them.
std::unordered_set<const c10::FunctionSchema*> g_fusible, g_float32_only, g_numbers_float32_only;
// Matmuls (mm, addmm, bmm, linear as the op records register them): they join runs, as TorchNeuron's concatenation
// engine merges them with the element-wise ops around them, but each runs with its own kernel (no generated code:
// the same bits as unfused eager, whatever the dtype), and an element-wise op after a matmul starts a new segment.
std::unordered_set<const c10::FunctionSchema*> g_matmuls;
py::object* g_compile_run = nullptr;  // leaked on purpose, like the executables: workers outlive module teardown

struct FusedExecutable {
  int sightings = 0;
  bool unusable = false;      // its compile or a run failed: the signature stays unfused
  py::object* run = nullptr;  // what the compile path built: a FusedKernels, or run(inputs) -> outputs
  const FusedKernels* kernels = nullptr;  // *run when it is a FusedKernels
};
std::mutex g_executables_mu;
std::unordered_map<uint64_t, FusedExecutable> g_executables;

std::atomic<int64_t> g_fused_launches{0}, g_fused_ops{0}, g_unfused_ops{0}, g_compiles{0}, g_failures{0};
std::atomic<int64_t> g_matmul_runs{0}, g_matmul_run_ops{0};  // segments with a matmul, run kernel by kernel

// The fused operators that ran since the last reset_fused_run_calls(): the executable ids of a segment's ops, in
// order (ops/tracking.py names the operator by joining their tracked names with '|') -> runs. The ops' own
// executables keep counting their calls (the cost model prices each op's work); the trackers subtract them.
std::mutex g_fused_records_mu;
std::map<std::vector<int64_t>, int64_t> g_fused_records;

bool is_matmul(const FusibleCall& call) { return g_matmuls.count(&call.op->schema()) > 0; }
std::mutex g_failure_mu;
std::string g_last_failure;

uint64_t mix_bytes(uint64_t h, const void* p, size_t n) {
  for (size_t i = 0; i < n; i += sizeof(uint64_t)) {
    uint64_t v = 0;
    std::memcpy(&v, static_cast<const char*>(p) + i, std::min(sizeof(v), n - i));
    h = mix(h, v);
  }
  return h;
}

// Python numbers that became 0-dim CPU tensors (x * 1.5): their value is baked into the fused code.
bool is_wrapped_scalar(const at::Tensor& t) {
  return t.defined() && t.is_cpu() && t.unsafeGetTensorImpl()->is_wrapped_number();
}

bool is_plain(const c10::IValue& v) {
  return v.isDouble() || v.isInt() || v.isBool() || v.isNone() || v.isIntList() || v.isScalar();
}

// Unlike the eager signature (signature.h), floats are part of this key: the fused code bakes them in.
uint64_t mix_plain(uint64_t h, const c10::IValue& v) {
  if (v.isDouble()) {
    const double d = v.toDouble();
    return mix_bytes(mix(h, 0xd0), &d, sizeof(d));
  }
  if (v.isInt()) return mix(mix(h, 0x10), static_cast<uint64_t>(v.toInt()));
  if (v.isBool()) return mix(h, v.toBool() ? 0xb1 : 0xb0);
  if (v.isNone()) return mix(h, 0x70);
  if (v.isIntList()) {
    h = mix(h, 0x11);
    for (int64_t e : v.toIntVector()) h = mix(h, static_cast<uint64_t>(e));
    return h;
  }
  const c10::Scalar s = v.toScalar();  // complex
  const c10::complex<double> z = s.toComplexDouble();
  return mix_bytes(mix(h, 0xc0), &z, sizeof(z));
}

// The outputs of a segment's ops so far, by the device block each fills. Every output is a new block of
// its own (queued_ops.cpp queues no op whose result shares storage), so an argument in one of those
// blocks either is that output or reaches into it (a view), and a lookup is a pointer comparison. A block
// freed while the run was issued is reused at once on its stream (allocator.cpp), so a later output can
// fill the block of an earlier one: the newest output owns the block, and the earlier one is superseded
// (nothing refers to it any more, or its block could not have been reused).
class ProducedIndex {
 public:
  struct Produced {
    const void* block;
    const TensorSnapshot* tensor;
    size_t item, output;  // item relative to the segment
  };
  // Adds call's outputs; each output whose block one of them takes over goes to *superseded, if given.
  void add(const FusibleCall& call, size_t item, std::vector<std::pair<size_t, size_t>>* superseded = nullptr) {
    for (size_t j = 0; j < call.outputs.size(); j++) {
      const void* block = call.outputs[j].block;
      for (auto p = entries_.begin(); p != entries_.end();) {
        if (p->block != block || block == nullptr) {
          ++p;
          continue;
        }
        if (superseded != nullptr) superseded->emplace_back(p->item, p->output);
        p = entries_.erase(p);
      }
      entries_.push_back({block, &call.outputs[j], item, j});
    }
  }
  // The output `t` is, or nullptr; `reaches_into` when `t` lies in an output's block without being it.
  const Produced* find(const TensorSnapshot& t, bool* reaches_into) const {
    *reaches_into = false;
    const void* block = t.block;
    if (block == nullptr) return nullptr;  // no bytes: nothing to wire
    for (const Produced& p : entries_) {
      if (p.block != block) continue;
      if (*p.tensor == t) return &p;
      *reaches_into = true;
    }
    return nullptr;
  }
  void clear() { entries_.clear(); }

 private:
  std::vector<Produced> entries_;
};

// How each argument of a segment's ops is wired, and the segment's key.
struct SegmentPlan {
  uint64_t key = 0;
  std::vector<const TensorSnapshot*> inputs;        // external, deduplicated
  std::vector<std::pair<size_t, size_t>> live;      // (item, output) the fused code must write
  std::vector<const TensorSnapshot*> live_tensors;  // their bytes
};

// Whether an op of the run after `end` (a later segment, or an op run unfused) reads `block` before an output
// of the run takes the block over.
bool read_after(const std::vector<const FusibleCall*>& calls, size_t end, const void* block) {
  for (size_t i = end; i < calls.size(); i++) {
    for (const FusibleArgument& a : calls[i]->arguments) {
      if (a.tensor && a.tensor->block == block) return true;
    }
    for (const TensorSnapshot& out : calls[i]->outputs) {
      if (out.block == block) return false;
    }
  }
  return false;
}

// use_counts[first_use_count[i] + j]: the references output j of op i had when its run was sealed.
SegmentPlan plan_segment(const std::vector<const FusibleCall*>& calls, const std::vector<size_t>& use_counts,
                         const std::vector<size_t>& first_use_count, size_t begin, size_t end) {
  SegmentPlan plan;
  ProducedIndex produced;
  std::vector<std::pair<size_t, size_t>> superseded;
  uint64_t h = mix(0xada9, end - begin);
  for (size_t i = begin; i < end; i++) {
    h = mix(h, reinterpret_cast<uint64_t>(&calls[i]->op->schema()));
    for (const FusibleArgument& a : calls[i]->arguments) {
      if (!a.tensor) {
        const c10::IValue& v = a.value;
        if (!v.isTensor()) {
          h = mix_plain(h, v);
        } else if (!v.toTensor().defined()) {
          h = mix(h, 0x70);
        } else {  // a Python number
          const at::Tensor& t = v.toTensor();
          h = mix_bytes(mix(h, static_cast<uint64_t>(t.scalar_type()) + 0x5c), t.data_ptr(), t.itemsize());
        }
        continue;
      }
      const TensorSnapshot& t = *a.tensor;
      bool reaches_into = false;
      if (const ProducedIndex::Produced* p = produced.find(t, &reaches_into)) {
        h = mix(mix(mix(h, 0x9e), p->item), p->output);
        continue;
      }
      size_t k = 0;
      while (k < plan.inputs.size() && !(*plan.inputs[k] == t)) k++;
      h = mix(mix(h, 0xe7), k);
      if (k == plan.inputs.size()) {
        plan.inputs.push_back(&t);
        h = mix(h, static_cast<uint64_t>(t.dtype));
        for (int64_t s : t.sizes) h = mix(h, static_cast<uint64_t>(s));
        for (int64_t s : t.strides) h = mix(h, static_cast<uint64_t>(s) + 0x5d);
      }
    }
    // The results' dtypes: type promotion gave them from the default dtype the ops were issued under.
    for (const TensorSnapshot& out : calls[i]->outputs) h = mix(h, static_cast<uint64_t>(out.dtype) + 0x0d);
    produced.add(*calls[i], i - begin, &superseded);
  }
  std::sort(superseded.begin(), superseded.end());
  for (size_t i = begin; i < end; i++) {
    for (size_t j = 0; j < calls[i]->outputs.size(); j++) {
      // Nobody refers to an intermediate result any more (queued work holds it weakly) and no later op of
      // the run reads it, or a later output of the segment took its block: the fused code need not write
      // it, and must not write it over that output.
      const bool dead = (g_skip_intermediate.load(std::memory_order_relaxed) && i + 1 != end &&
                         use_counts[first_use_count[i] + j] == 0 &&
                         !read_after(calls, end, calls[i]->outputs[j].block)) ||
                        std::binary_search(superseded.begin(), superseded.end(), std::make_pair(i - begin, j));
      h = mix(h, dead ? 0x0f : 0x1f);
      if (!dead) {
        plan.live.emplace_back(i - begin, j);
        plan.live_tensors.push_back(&calls[i]->outputs[j]);
      }
    }
  }
  plan.key = h;
  return plan;
}

// Whether `call` must start a new segment: an argument is a view into an output of the segment so far.
bool reaches_into_segment(const ProducedIndex& produced, const FusibleCall& call) {
  for (const FusibleArgument& a : call.arguments) {
    if (!a.tensor) continue;
    bool reaches_into = false;
    if (produced.find(*a.tensor, &reaches_into) == nullptr && reaches_into) return true;
  }
  return false;
}

bool has_only_fusible_arguments(const FusibleCall& call) {
  for (const FusibleArgument& a : call.arguments) {
    if (!a.tensor && !a.value.isTensor() && !is_plain(a.value)) return false;
  }
  return true;
}

std::string describe_ops(const std::vector<const FusibleCall*>& calls, const std::vector<std::unique_ptr<QueuedWork>>& items,
                         size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; i++) {
    out += (i > begin ? "; " : "") + calls[i]->op->schema().name() + source_text(items[i]->source);
  }
  return out;
}

py::object python_value(const c10::IValue& v) {
  if (v.isTensor() && is_wrapped_scalar(v.toTensor())) return torch::jit::toPyObject(c10::IValue(v.toTensor().item()));
  return torch::jit::toPyObject(v);
}

// What compile_run (localneuron/adaptive_eager/compile.py) builds the fused graph from.
py::dict describe_for_compile(const std::vector<const FusibleCall*>& calls, const std::vector<std::unique_ptr<QueuedWork>>& items,
                              size_t begin, size_t end, const SegmentPlan& plan) {
  py::list ops, lines, result_dtypes;
  ProducedIndex produced;
  for (size_t i = begin; i < end; i++) {
    const c10::OperatorName& name = calls[i]->op->operator_name();
    py::list arguments;
    for (const FusibleArgument& a : calls[i]->arguments) {
      if (!a.tensor) {
        arguments.append(py::make_tuple("constant", python_value(a.value)));
        continue;
      }
      bool reaches_into = false;
      if (const ProducedIndex::Produced* p = produced.find(*a.tensor, &reaches_into)) {
        arguments.append(py::make_tuple("result", p->item, p->output));
        continue;
      }
      size_t k = 0;
      while (!(*plan.inputs[k] == *a.tensor)) k++;
      arguments.append(py::make_tuple("input", k));
    }
    py::list dtypes;
    for (const TensorSnapshot& out : calls[i]->outputs) {
      dtypes.append(py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(out.dtype))));
    }
    ops.append(py::make_tuple(name.name, name.overload_name, arguments));
    result_dtypes.append(dtypes);
    lines.append(source_text(items[i]->source));
    produced.add(*calls[i], i - begin);
  }
  py::list inputs, live;
  for (const TensorSnapshot* t : plan.inputs) inputs.append(cpu_alias(*t));
  for (const auto& [item, output] : plan.live) live.append(py::make_tuple(item, output));
  py::dict d;
  d["ops"] = ops;
  d["result_dtypes"] = result_dtypes;
  d["lines"] = lines;
  d["inputs"] = inputs;
  d["outputs"] = live;
  return d;
}

void note_failure(const std::string& message) {
  g_failures++;
  std::lock_guard<std::mutex> lock(g_failure_mu);
  g_last_failure = message;
}

bool python_usable() { return Py_IsInitialized() && !_Py_IsFinalizing() && g_compile_run != nullptr; }

// Calls a kernel with N pointer arguments (the generated kernels take typed pointers; on this ABI a
// pointer argument is passed alike whatever it points to).
template <size_t... I>
void invoke_with(void* kernel, void* const* pointers, std::index_sequence<I...>) {
  using Kernel = void (*)(decltype((void)I, static_cast<void*>(nullptr))...);
  reinterpret_cast<Kernel>(kernel)(pointers[I]...);
}
template <size_t N>
void invoke(void* kernel, void* const* pointers) {
  invoke_with(kernel, pointers, std::make_index_sequence<N>{});
}
template <size_t... N>
constexpr std::array<FusedKernels::Invoker, sizeof...(N)> invokers(std::index_sequence<N...>) {
  return {&invoke<N>...};
}
constexpr auto kInvokers = invokers(std::make_index_sequence<FusedKernels::kMaxKernelArguments + 1>{});

bool has_layout(const TensorSnapshot& t, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                at::ScalarType dtype) {
  return t.dtype == dtype && c10::IntArrayRef(t.sizes) == c10::IntArrayRef(sizes) &&
         c10::IntArrayRef(t.strides) == c10::IntArrayRef(strides);
}

// Whether `output` took over the block of one of the run's inputs (freed while the run was issued): written
// in place, a kernel could overwrite input data a later kernel of the run still reads.
bool fills_an_input_block(const TensorSnapshot& output, const std::vector<const TensorSnapshot*>& inputs) {
  return std::any_of(inputs.begin(), inputs.end(), [&](const TensorSnapshot* t) { return t->block == output.block; });
}

void run_python_wrapper(const py::object& run, const SegmentPlan& plan) {
  py::gil_scoped_acquire gil;
  py::list inputs;
  for (const TensorSnapshot* t : plan.inputs) inputs.append(cpu_alias(*t));
  const auto outputs = run(inputs).cast<std::vector<at::Tensor>>();
  TORCH_CHECK(outputs.size() == plan.live_tensors.size(), "the fused executable returned ", outputs.size(),
              " results, not ", plan.live_tensors.size());
  for (size_t k = 0; k < outputs.size(); k++) cpu_alias(*plan.live_tensors[k]).copy_(outputs[k]);
}

}  // namespace

FusedKernels::FusedKernels(const std::vector<at::Tensor>& buffers,
                           const std::vector<std::pair<uintptr_t, std::vector<int>>>& calls, std::vector<int> outputs,
                           size_t inputs, py::object python_run)
    : outputs_(std::move(outputs)), inputs_(inputs), python_run_(std::move(python_run)) {
  for (const at::Tensor& b : buffers) buffers_.push_back({b.sizes().vec(), b.strides().vec(), b.scalar_type()});
  auto check = [&](int operand) {
    TORCH_CHECK(operand >= 0 ? static_cast<size_t>(operand) < inputs_ : static_cast<size_t>(-1 - operand) < buffers_.size(),
                "fused kernels: operand ", operand, " names no input or buffer");
  };
  for (const auto& [address, operands] : calls) {
    TORCH_CHECK(address != 0, "fused kernels: a kernel without an address");
    TORCH_CHECK(operands.size() <= kMaxKernelArguments, "fused kernels: a kernel with ", operands.size(),
                " arguments, more than the ", kMaxKernelArguments, " a program calls");
    for (int operand : operands) check(operand);
    calls_.push_back({kInvokers[operands.size()], reinterpret_cast<void*>(address), operands});
  }
  for (int operand : outputs_) check(operand);
}

void FusedKernels::run(const std::vector<const TensorSnapshot*>& inputs,
                       const std::vector<const TensorSnapshot*>& outputs) const {
  TORCH_CHECK(inputs.size() == inputs_ && outputs.size() == outputs_.size(), "fused kernels for ", inputs_,
              " inputs and ", outputs_.size(), " results run with ", inputs.size(), " and ", outputs.size());
  // Each buffer lives in the result it becomes, when its layout is the result's, else in scratch memory.
  c10::SmallVector<void*, 8> memory(buffers_.size(), nullptr);
  c10::SmallVector<at::Tensor, 8> scratch(buffers_.size());
  c10::SmallVector<bool, 8> written_in_place(outputs_.size(), false);
  for (size_t j = 0; j < outputs_.size(); j++) {
    const int operand = outputs_[j];
    if (operand >= 0) continue;
    const Layout& b = buffers_[-1 - operand];
    if (memory[-1 - operand] == nullptr && has_layout(*outputs[j], b.sizes, b.strides, b.dtype) &&
        !fills_an_input_block(*outputs[j], inputs)) {
      memory[-1 - operand] = outputs[j]->data();
      written_in_place[j] = true;
    }
  }
  for (size_t b = 0; b < buffers_.size(); b++) {
    if (memory[b] == nullptr) {
      scratch[b] = at::empty_strided(buffers_[b].sizes, buffers_[b].strides, at::TensorOptions().dtype(buffers_[b].dtype));
      memory[b] = scratch[b].data_ptr();
    }
  }
  auto pointer = [&](int operand) { return operand >= 0 ? inputs[operand]->data() : memory[-1 - operand]; };
  void* pointers[kMaxKernelArguments];
  for (const Call& call : calls_) {
    for (size_t a = 0; a < call.operands.size(); a++) pointers[a] = pointer(call.operands[a]);
    call.invoke(call.kernel, pointers);
  }
  for (size_t j = 0; j < outputs_.size(); j++) {
    if (written_in_place[j]) continue;
    const int operand = outputs_[j];
    cpu_alias(*outputs[j]).copy_(operand >= 0 ? cpu_alias(*inputs[operand]) : scratch[-1 - operand]);
  }
}

bool is_fusible_call(const c10::OperatorHandle& op, c10::ArrayRef<const at::Tensor*> operands) {
  const c10::FunctionSchema* schema = &op.schema();
  if (g_matmuls.count(schema) > 0) return true;  // runs with its own kernel: any dtype
  if (g_fusible.count(schema) == 0) return false;
  bool number = false;
  at::ScalarType sixteen_bit = at::ScalarType::Undefined;  // a 16-bit float operand's type
  for (const at::Tensor* t : operands) {
    if (!t->defined()) continue;
    // ATen adds complex numbers as a + (1 + 0j) * b, which makes NaN of an infinite part; the generated code
    // adds straight (localneuron/adaptive_eager/fusible_ops.py).
    if (at::isComplexType(t->scalar_type())) return false;
    number = number || is_wrapped_scalar(*t);
    if (t->scalar_type() == at::kHalf || t->scalar_type() == at::kBFloat16) sixteen_bit = t->scalar_type();
  }
  if (sixteen_bit == at::ScalarType::Undefined) return true;
  // ATen runs a call with a 0-dim operand through its scalar path and, per op, keeps that operand's value
  // (mul: a float32 one multiplies in float32) or rounds it to the 16-bit type first (add); the generated
  // code always rounds it.
  for (const at::Tensor* t : operands) {
    if (t->defined() && t->dim() == 0 && !is_wrapped_scalar(*t) && t->scalar_type() != sixteen_bit) return false;
  }
  if (g_float32_only.count(schema) > 0) return false;
  return !number || g_numbers_float32_only.count(schema) == 0;
}

bool runs_may_form() {
  return g_enabled.load(std::memory_order_relaxed) && !at::globalContext().deterministicAlgorithms();
}

bool joins_run(const QueuedWork& work) { return runs_may_form() && work.fusible(); }

bool FusedRun::full() const { return items_.size() >= g_run_limit.load(std::memory_order_relaxed); }

std::string FusedRun::describe() const { return "Adaptive Eager run of " + std::to_string(items_.size()) + " ops"; }

void FusedRun::run_unfused(size_t begin, size_t end) {
  g_unfused_ops += static_cast<int64_t>(end - begin);
  run_each(begin, end);
}

void FusedRun::run_each(size_t begin, size_t end) {
  for (size_t i = begin; i < end; i++) {
    try {
      items_[i]->run();
    } catch (const std::exception& e) {
      // Later ops still run, as separate queue entries would, and each failure is held as theirs would be.
      const QueuedWork& item = *items_[i];
      hold_failure(device_, item.describe() + " (op " + std::to_string(i + 1) + " of " + std::to_string(items_.size()) +
                                " in an Adaptive Eager run)",
                   item.source, item.thread, e);
    }
    // A trace shows each op run with its own kernel as the op's own launch, as it would show it unfused.
    if (items_[i]->launch.on) record_launch(items_[i]->launch);
  }
}

void FusedRun::record_fused(size_t begin, size_t end) const {
  std::vector<int64_t> ids;
  ids.reserve(end - begin);
  for (size_t i = begin; i < end; i++) {
    if (items_[i]->executable == nullptr) return;  // not an op the trackers list: its ops stay listed one by one
    ids.push_back(items_[i]->executable->id);
  }
  std::lock_guard<std::mutex> lock(g_fused_records_mu);
  g_fused_records[ids]++;
}

// The element-wise ops before the matmuls run as a segment of their own would (generated code where it applies), the
// matmuls with their own kernels; the segment is one operator for the trackers.
void FusedRun::run_matmul_segment(size_t begin, size_t first_matmul, size_t end) {
  if (first_matmul > begin) run_generated(begin, first_matmul, /*record=*/false);
  run_each(first_matmul, end);
  g_matmul_runs++;
  g_matmul_run_ops += static_cast<int64_t>(end - begin);
  record_fused(begin, end);
}

void FusedRun::run_segment(size_t begin, size_t end) {
  if (end - begin < g_low_threshold.load(std::memory_order_relaxed)) {
    run_unfused(begin, end);
    return;
  }
  size_t first_matmul = begin;
  while (first_matmul < end && !is_matmul(*calls_[first_matmul])) first_matmul++;
  if (first_matmul < end) {
    run_matmul_segment(begin, first_matmul, end);
    return;
  }
  run_generated(begin, end, /*record=*/true);
}

void FusedRun::run_generated(size_t begin, size_t end, bool record) {
  const std::vector<const FusibleCall*>& calls = calls_;
  if (end - begin < g_low_threshold.load(std::memory_order_relaxed) || !python_usable()) {
    run_unfused(begin, end);
    return;
  }
  const SegmentPlan plan = plan_segment(calls, use_counts_, first_use_count_, begin, end);
  py::object* executable = nullptr;
  const FusedKernels* kernels = nullptr;
  bool compile = false;
  {
    std::lock_guard<std::mutex> lock(g_executables_mu);
    FusedExecutable& entry = g_executables[plan.key];
    entry.sightings++;
    executable = entry.unusable ? nullptr : entry.run;
    kernels = entry.unusable ? nullptr : entry.kernels;
    compile = executable == nullptr && !entry.unusable && entry.sightings == kCompileAtSighting;
  }
  if (compile) {
    py::gil_scoped_acquire gil;
    try {
      py::object built = (*g_compile_run)(describe_for_compile(calls, items_, begin, end, plan));
      g_compiles++;
      std::lock_guard<std::mutex> lock(g_executables_mu);
      FusedExecutable& entry = g_executables[plan.key];
      if (built.is_none()) {
        entry.unusable = true;
      } else {
        if (py::isinstance<FusedKernels>(built)) entry.kernels = kernels = built.cast<const FusedKernels*>();
        entry.run = executable = new py::object(std::move(built));
      }
    } catch (const py::error_already_set& e) {
      std::string what = e.what();
      what = what.substr(0, what.find("\n\nAt:"));  // the message, not Python's traceback
      note_failure("compiling the fused run " + describe_ops(calls, items_, begin, end) + " failed: " + what);
      std::lock_guard<std::mutex> lock(g_executables_mu);
      g_executables[plan.key].unusable = true;
    }
  }
  if (executable == nullptr) {
    run_unfused(begin, end);
    return;
  }
  try {
    if (kernels != nullptr && !trace_recording()) {
      kernels->run(plan.inputs, plan.live_tensors);  // no Python: the worker does not wait for the GIL
      kernels->launches.fetch_add(1, std::memory_order_relaxed);
    } else {
      // Where no C++ program could be read, and while a trace records (the wrapper notes the launch).
      run_python_wrapper(kernels != nullptr ? kernels->python_run() : *executable, plan);
    }
  } catch (const std::exception& e) {
    // The ops' own kernels give the results (and, if one of them fails, its error and line).
    note_failure("the fused executable of " + describe_ops(calls, items_, begin, end) + " failed (" + e.what() +
                 "); the run ran unfused and this signature stays unfused");
    {
      std::lock_guard<std::mutex> lock(g_executables_mu);
      g_executables[plan.key].unusable = true;
    }
    run_unfused(begin, end);
    return;
  }
  g_fused_launches++;
  g_fused_ops += static_cast<int64_t>(end - begin);
  if (record) record_fused(begin, end);
}

void FusedRun::seal() {
  if (calls_.size() == items_.size()) return;
  calls_.reserve(items_.size());
  first_use_count_.reserve(items_.size());
  for (const auto& item : items_) {
    calls_.push_back(item->fusible_call());
    first_use_count_.push_back(use_counts_.size());
    for (const c10::StorageImpl* s : calls_.back()->output_storages) {
      use_counts_.push_back(c10::raw::intrusive_ptr::use_count(const_cast<c10::StorageImpl*>(s)));
    }
  }
}

void FusedRun::run() {
  seal();
  const std::vector<const FusibleCall*>& calls = calls_;
  size_t begin = 0;
  ProducedIndex produced;  // of the segment from `begin`
  for (size_t i = 0; i < calls.size(); i++) {
    if (!has_only_fusible_arguments(*calls[i])) {
      run_segment(begin, i);
      run_unfused(i, i + 1);
      begin = i + 1;
      produced.clear();
      continue;
    }
    // The matmuls that close a segment end it: an element-wise op after a matmul starts the next segment, so a
    // segment is the element-wise ops before its matmuls and those matmuls (TorchNeuron's 'mul|pow|aten::mm').
    // A view into an output of the segment ends it for generated code only: a matmul runs with its own kernel.
    const bool matmul = is_matmul(*calls[i]);
    if (i > begin && (matmul ? false : is_matmul(*calls[i - 1]) || reaches_into_segment(produced, *calls[i]))) {
      run_segment(begin, i);
      begin = i;
      produced.clear();
    }
    produced.add(*calls[i], i - begin);
  }
  if (begin < calls.size()) run_segment(begin, calls.size());
}

void bind_fusion(py::module_& m) {
  py::class_<FusedKernels>(m, "FusedKernels",
                           "A fused run's generated kernels as a C++ program (localneuron/adaptive_eager/native.py).")
      .def(py::init<const std::vector<at::Tensor>&, const std::vector<std::pair<uintptr_t, std::vector<int>>>&,
                    std::vector<int>, size_t, py::object>(),
           py::arg("buffers"), py::arg("calls"), py::arg("outputs"), py::arg("inputs"), py::arg("python_run"))
      .def_static("input_operand", &FusedKernels::input_operand)
      .def_static("buffer_operand", &FusedKernels::buffer_operand)
      .def_property_readonly("launches", [](const FusedKernels& k) { return k.launches.load(); })
      .def("reset_launches", [](FusedKernels& k) { k.launches = 0; });
  m.def(
      "install_fusion",
      [](py::object compile_run, const std::vector<std::string>& ops, const std::vector<std::string>& float32_only,
         const std::vector<std::string>& numbers_float32_only, const std::vector<std::string>& matmuls) {
        TORCH_CHECK(g_compile_run == nullptr, "Adaptive Eager is installed once per process");
        auto schema_of = [](const std::string& qualified) {
          const auto dot = qualified.find('.');
          const std::string name = qualified.substr(0, dot);
          const std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
          return &c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str()).schema();
        };
        for (const std::string& op : ops) g_fusible.insert(schema_of(op));
        for (const std::string& op : float32_only) g_float32_only.insert(schema_of(op));
        for (const std::string& op : numbers_float32_only) g_numbers_float32_only.insert(schema_of(op));
        for (const std::string& op : matmuls) g_matmuls.insert(schema_of(op));
        g_compile_run = new py::object(std::move(compile_run));
      },
      py::arg("compile_run"), py::arg("ops"), py::arg("float32_only"), py::arg("numbers_float32_only"),
      py::arg("matmuls"),
      "Adaptive Eager: compile_run(description) -> run(inputs) -> outputs; the fusible ops ('aten::mul.Tensor'), "
      "those of them fusible on float32 only, those fusible with a Python number among their arguments on "
      "float32 only, and the matmuls, which join runs and run with their own kernels.");
  m.def("fused_run_calls", [] {
    std::lock_guard<std::mutex> lock(g_fused_records_mu);
    std::vector<std::pair<std::vector<int64_t>, int64_t>> out(g_fused_records.begin(), g_fused_records.end());
    return out;
  }, "The fused operators that ran since the last reset: (executable ids of their ops in order, runs).");
  m.def("reset_fused_run_calls", [] {
    std::lock_guard<std::mutex> lock(g_fused_records_mu);
    g_fused_records.clear();
  });
  m.def(
      "set_fusion",
      [](bool enabled, size_t run_limit, size_t low_threshold, bool skip_intermediate) {
        TORCH_CHECK(run_limit >= 1 && low_threshold >= 1, "run limit and low threshold must be at least 1");
        g_run_limit = run_limit;
        g_low_threshold = low_threshold;
        g_skip_intermediate = skip_intermediate;
        g_enabled = enabled;
      },
      py::arg("enabled"), py::arg("run_limit"), py::arg("low_threshold"), py::arg("skip_intermediate"));
  m.def("fusion_counters", [] {
    py::dict d;
    d["fused_launches"] = g_fused_launches.load();
    d["fused_ops"] = g_fused_ops.load();
    d["unfused_ops"] = g_unfused_ops.load();
    d["matmul_runs"] = g_matmul_runs.load();
    d["matmul_run_ops"] = g_matmul_run_ops.load();
    d["compiles"] = g_compiles.load();
    d["failures"] = g_failures.load();
    std::lock_guard<std::mutex> lock(g_failure_mu);
    d["last_failure"] = g_last_failure;
    return d;
  });
  m.def("reset_fusion_counters", [] {
    g_fused_launches = 0;
    g_fused_ops = 0;
    g_unfused_ops = 0;
    g_matmul_runs = 0;
    g_matmul_run_ops = 0;
    g_compiles = 0;
    g_failures = 0;
    std::lock_guard<std::mutex> lock(g_failure_mu);
    g_last_failure.clear();
  });
  m.def("clear_fused_executables", [] {
    std::lock_guard<std::mutex> lock(g_executables_mu);
    g_executables.clear();  // their callables stay allocated: a worker may be calling one
  });
}

}  // namespace localneuron
