// Adaptive Eager (TORCH_NEURONX_ENABLE_CONCATENATION=1): consecutive fusible ops on a stream's queue
// are held back as one run, and the worker runs the run as one executable that the compile path
// (localneuron/adaptive_eager/) generated for the run's signature.
//
// A run ends where the queue must make progress or order matters beyond element-wise data flow: at
// any synchronisation (host reads, synchronize(), events, stream queries, memory statistics), at the
// first op that is not fusible, and at TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT ops. Only ops of
// the allow-list Python installs (localneuron/adaptive_eager/fusible_ops.py) join runs, and only with
// new outputs (no in-place, no out=). Deterministic mode keeps every op unfused.
#pragma once
#include "queue.h"

#include <pybind11/pybind11.h>

#include <exception>
#include <memory>
#include <vector>

namespace localneuron {

// Whether the stream should hold `work` back in its pending run (fusion on, not deterministic, fusible).
bool joins_run(const QueuedWork& work);
// Whether any work may join a run now (fusion on, not deterministic).
bool runs_may_form();
// Whether a call may be fused: its op is on the allow-list, and its entry's dtype rule admits the
// call's operands (`arguments`: its host arguments).
bool is_fusible_call(const c10::OperatorHandle& op, const c10::IValue* arguments, size_t count);

// The pending run of a stream: its ops run fused, or one by one where fusion does not apply.
class FusedRun final : public QueuedWork {
 public:
  void add(std::unique_ptr<QueuedWork> work) { items_.push_back(std::move(work)); }
  bool full() const;
  void run() override;
  std::string describe() const override;

 private:
  void run_segment(const std::vector<FusibleCall>& calls, size_t begin, size_t end);
  void run_unfused(size_t begin, size_t end);
  std::vector<std::unique_ptr<QueuedWork>> items_;
  std::ptrdiff_t failed_ = -1;  // the item whose error this run reports
  std::exception_ptr first_error_;
};

void bind_fusion(pybind11::module_& m);

}  // namespace localneuron
