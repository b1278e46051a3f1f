// Adaptive Eager (TORCH_NEURONX_ENABLE_CONCATENATION=1): consecutive fusible ops on a stream's queue
// are held back as one run, and the worker runs the run as one executable that the compile path
// (localneuron/adaptive_eager/) generated for the run's signature.
//
// A run ends where the queue must make progress or order matters beyond element-wise data flow: at
// any synchronisation (host reads, synchronize(), events, stream queries, memory statistics), at the
// first op that is not fusible, and at TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT ops. Only ops of
// the allow-list Python installs (the op records' `fusible` fields, read by adaptive_eager/fusible_ops.py)
// join runs, and only with new outputs (no in-place, no out=). Deterministic mode keeps every op unfused.
//
// Matmuls (the `matmuls` Python installs: mm, addmm, bmm, linear) join runs too, as TorchNeuron's concatenation
// engine merges a matmul with the element-wise ops before it: an element-wise op after a matmul starts a new
// segment (consecutive matmuls stay in one); in a segment that holds one, the element-wise ops before the matmuls run
// as they would alone (generated code where it applies) and each matmul with its own kernel, in order (the same
// bits as unfused eager). Every segment that runs as one
// operator (generated code, or a matmul segment) is counted once under its ops' executable ids
// (fused_run_calls), which the trackers list as one op named by their tracked names joined with '|'.
#pragma once
#include "queue/queue.h"

#include <pybind11/pybind11.h>

#include <array>
#include <atomic>
#include <exception>
#include <memory>
#include <vector>

namespace localneuron {

// Whether the stream should hold `work` back in its pending run (fusion on, not deterministic, fusible).
bool joins_run(const QueuedWork& work);
// Whether any work may join a run now (fusion on, not deterministic).
bool runs_may_form();
// Whether a call may be fused: its op is on the allow-list, and its entry's dtype rule admits the
// call's tensor operands (undefined ones allowed).
bool is_fusible_call(const c10::OperatorHandle& op, c10::ArrayRef<const at::Tensor*> operands);

// The pending run of a stream: its ops run fused, or one by one where fusion does not apply. Each op that fails
// is held as its own failure (queue/held_errors.h), with its own line and thread; the run itself does not raise.
class FusedRun final : public QueuedWork {
 public:
  explicit FusedRun(c10::DeviceIndex device) : device_(device) {}
  void add(std::unique_ptr<QueuedWork> work) { items_.push_back(std::move(work)); }
  bool full() const;
  // Called where the run ends, on the thread that ends it (the queue's hand-over): takes the ops' calls
  // and how many references each output has at this point of the program. Which intermediates the fused
  // code may skip then follows from the program, not from how far Python has run by the time the run
  // executes, so the run's key is the same each time the program passes by.
  void seal();
  void run() override;
  std::string describe() const override;

 private:
  void run_segment(size_t begin, size_t end);
  void run_unfused(size_t begin, size_t end);
  void run_matmul_segment(size_t begin, size_t first_matmul, size_t end);
  // Runs [begin, end) (element-wise ops only) as one generated executable where it applies, else op by op; `record`:
  // a fused run counts as one operator for the trackers (not when it is part of a matmul segment, which counts).
  void run_generated(size_t begin, size_t end, bool record);
  void run_each(size_t begin, size_t end);  // each op with its own kernel, its failure held, its launch traced
  // The segment ran as one fused operator: counted for the trackers under its ops' names joined by '|'.
  void record_fused(size_t begin, size_t end) const;
  std::vector<std::unique_ptr<QueuedWork>> items_;
  std::vector<const FusibleCall*> calls_;   // one per item (held by the item), from seal()
  std::vector<size_t> use_counts_;          // of each output storage of calls_, in order, at seal()
  std::vector<size_t> first_use_count_;     // where each call's outputs start in use_counts_
  c10::DeviceIndex device_;
};

// A fused executable's generated kernels as a program the worker runs without Python: kernels called
// through their extern "C" entry points on data pointers of the run's inputs, of buffers, and of the
// run's live outputs (written in place where the code generator's layout is theirs, else copied).
// Read off the generated wrapper by localneuron/adaptive_eager/native.py.
class FusedKernels {
 public:
  // An operand: input k of the run is k, buffer b is -1 - b.
  static int input_operand(int k) { return k; }
  static int buffer_operand(int b) { return -1 - b; }
  static constexpr size_t kMaxKernelArguments = 64;
  using Invoker = void (*)(void* kernel, void* const* pointers);

  // buffers: tensors with the layouts of the wrapper's allocations; calls: (kernel address, operands);
  // outputs: the operand each result is; python_run: the wrapper's route (traced runs go through it).
  FusedKernels(const std::vector<at::Tensor>& buffers, const std::vector<std::pair<uintptr_t, std::vector<int>>>& calls,
               std::vector<int> outputs, size_t inputs, pybind11::object python_run);
  void run(const std::vector<const TensorSnapshot*>& inputs, const std::vector<const TensorSnapshot*>& outputs) const;
  const pybind11::object& python_run() const { return python_run_; }
  mutable std::atomic<int64_t> launches{0};  // runs made, for the report (stats.py)

 private:
  struct Layout {
    std::vector<int64_t> sizes, strides;
    at::ScalarType dtype;
  };
  struct Call {
    Invoker invoke;
    void* kernel;
    std::vector<int> operands;
  };
  std::vector<Layout> buffers_;
  std::vector<Call> calls_;
  std::vector<int> outputs_;
  size_t inputs_;
  pybind11::object python_run_;
};

void bind_fusion(pybind11::module_& m);

}  // namespace localneuron
