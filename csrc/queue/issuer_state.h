// The thread-local state of the thread that issued queued work, which the worker running the work
// must see as that thread would have: kernels and the ops they call consult the dispatch key set
// (InferenceMode's and autocast's exclusions live there) and autograd's modes. Without it an
// in-place op on an inference tensor, or a host kernel's own copy into such a tensor, fails on the
// worker with "Inplace update to inference tensor outside InferenceMode".
//
// Not carried: global state (torch.use_deterministic_algorithms, matmul precision), which is read when
// the work runs, as on a device whose kernels were chosen at launch; and Python-level modes
// (TorchDispatchMode, functorch transforms), whose keys make an op run synchronously instead
// (issuer_needs_own_thread), since a worker never calls into Python for queued work.
#pragma once
#include <c10/core/AutogradState.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace localneuron {

struct IssuerState {
  c10::impl::PODLocalDispatchKeySet keys{};  // zero: the default key sets
  bool grad_mode = true, inference_mode = false, fw_grad_mode = true;

  static IssuerState capture() {
    const c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
    const c10::AutogradState& autograd = c10::AutogradState::get_tls_state();
    IssuerState state;
    state.keys.set_included(local.included_);
    state.keys.set_excluded(local.excluded_);
    state.grad_mode = autograd.get_grad_mode();
    state.inference_mode = autograd.get_inference_mode();
    state.fw_grad_mode = autograd.get_fw_grad_mode();
    return state;
  }
  bool operator==(const IssuerState& o) const {
    return keys.included_ == o.keys.included_ && keys.excluded_ == o.keys.excluded_ &&
           grad_mode == o.grad_mode && inference_mode == o.inference_mode && fw_grad_mode == o.fw_grad_mode;
  }
};

// Keys whose handlers live on the issuing thread's Python stacks: work issued under them stays there.
inline bool issuer_needs_own_thread() {
  constexpr c10::DispatchKeySet kPythonLevel({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                              c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
                                              c10::DispatchKey::FuncTorchDynamicLayerBackMode,
                                              c10::DispatchKey::Functionalize, c10::DispatchKey::PreDispatch});
  return !(c10::impl::tls_local_dispatch_key_set().included_ & kPythonLevel).empty();
}

// Runs the worker's part of a piece of work under its issuer's state; restores the worker's after.
class IssuerStateGuard {
 public:
  explicit IssuerStateGuard(const IssuerState& issuer)
      : saved_keys_(c10::impl::tls_local_dispatch_key_set()), saved_autograd_(c10::AutogradState::get_tls_state()) {
    c10::impl::_force_tls_local_dispatch_key_set(c10::impl::LocalDispatchKeySet(issuer.keys));
    c10::AutogradState::set_tls_state(c10::AutogradState(issuer.grad_mode, issuer.inference_mode,
                                                         issuer.fw_grad_mode,
                                                         saved_autograd_.get_multithreading_enabled()));
  }
  ~IssuerStateGuard() {
    c10::impl::_force_tls_local_dispatch_key_set(saved_keys_);
    c10::AutogradState::set_tls_state(saved_autograd_);
  }
  IssuerStateGuard(const IssuerStateGuard&) = delete;
  IssuerStateGuard& operator=(const IssuerStateGuard&) = delete;

 private:
  c10::impl::LocalDispatchKeySet saved_keys_;
  c10::AutogradState saved_autograd_;
};

}  // namespace localneuron
