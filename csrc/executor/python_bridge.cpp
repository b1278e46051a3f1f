#include "executor/python_bridge.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/PyInterpreter.h>

namespace py = pybind11;

namespace localneuron {
namespace {

ExecutorCallbacks* g_callbacks = nullptr;  // process lifetime; never destroyed after interpreter shutdown

const ExecutorCallbacks& callbacks() {
  TORCH_CHECK(g_callbacks != nullptr, "localneuron executor used before the Python runtime was set up");
  return *g_callbacks;
}

// Enum arguments (dtype, layout, memory_format) travel as ints on the stack; give Python its enums.
py::object to_python(const c10::IValue& value, const c10::TypePtr& declared) {
  c10::TypePtr type = declared;
  if (type->kind() == c10::TypeKind::OptionalType) type = type->expectRef<c10::OptionalType>().getElementType();
  if (value.isInt()) {
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return py::cast(static_cast<at::ScalarType>(value.toInt()));
      case c10::TypeKind::LayoutType:
        return py::cast(static_cast<at::Layout>(value.toInt()));
      case c10::TypeKind::MemoryFormatType:
        return py::cast(static_cast<at::MemoryFormat>(value.toInt()));
      default:
        break;
    }
  }
  if (value.isTensor()) {
    // toPyObject would turn a wrapped number (a Python scalar inside a composite op) back into an int.
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(value.toTensor()));
  }
  return torch::jit::toPyObject(value);
}

std::pair<py::tuple, py::dict> to_python_args(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                                              size_t begin) {
  const auto& args = schema.arguments();
  py::list positional;
  py::dict keywords;
  for (size_t i = 0; i < args.size(); i++) {
    py::object value = to_python(stack[begin + i], args[i].real_type());
    if (args[i].kwarg_only()) keywords[py::str(args[i].name())] = value;
    else positional.append(value);
  }
  return {py::tuple(positional), keywords};
}

void push_python_result(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const py::object& result) {
  const auto& returns = schema.returns();
  if (returns.empty()) return;
  if (returns.size() == 1) {
    stack->push_back(torch::jit::toIValue(result, returns[0].real_type()));
    return;
  }
  const auto items = result.cast<py::sequence>();
  TORCH_INTERNAL_ASSERT(items.size() == returns.size(), schema.name(), ": expected ", returns.size(), " results");
  for (size_t i = 0; i < returns.size(); i++) stack->push_back(torch::jit::toIValue(items[i], returns[i].real_type()));
}

py::object python_op(const c10::OperatorHandle& op) {
  return py::reinterpret_borrow<py::object>(torch::detail::getTorchApiFunction(op));
}

// Calls fn(executable_id, op, args, kwargs[, message]) and replaces the arguments by its results.
void call_with_op(const py::object& fn, int64_t executable_id, const c10::OperatorHandle& op,
                  torch::jit::Stack* stack, size_t begin, const char* message = nullptr) {
  const auto& schema = op.schema();
  py::gil_scoped_acquire gil;
  auto [args, kwargs] = to_python_args(schema, *stack, begin);
  py::object result = message ? fn(executable_id, python_op(op), args, kwargs, py::str(message))
                              : fn(executable_id, python_op(op), args, kwargs);
  torch::jit::drop(*stack, schema.arguments().size());
  push_python_result(schema, stack, result);
}

}  // namespace

void install_callbacks(ExecutorCallbacks installed) {
  TORCH_CHECK(g_callbacks == nullptr,
              "the localneuron executor's callbacks are already installed; they are installed once, at device "
              "registration (localneuron/device/registration.py)");
  for (const py::object* fn :
       {&installed.on_miss, &installed.run_python, &installed.on_device_failure, &installed.on_kernel_refusal,
        &installed.on_strided_write}) {
    TORCH_CHECK(PyCallable_Check(fn->ptr()), "install_executor: every callback must be callable");
  }
  g_callbacks = new ExecutorCallbacks(std::move(installed));
}

RouteDecision decide_route(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin) {
  const ExecutorCallbacks& cb = callbacks();
  py::gil_scoped_acquire gil;
  auto [args, kwargs] = to_python_args(op.schema(), stack, begin);
  auto decided = cb.on_miss(python_op(op), args, kwargs).cast<std::tuple<Route, Execution, int64_t, int64_t>>();
  return {std::get<0>(decided), std::get<1>(decided), std::get<2>(decided), std::get<3>(decided)};
}

void run_python_route(int64_t executable_id, const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin) {
  call_with_op(callbacks().run_python, executable_id, op, stack, begin);
}

void recover_device_failure(int64_t executable_id, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                            size_t begin, const char* message) {
  call_with_op(callbacks().on_device_failure, executable_id, op, stack, begin, message);
}

void report_kernel_refusal(const char* op_name, const std::string& reason) {
  const ExecutorCallbacks& cb = callbacks();
  py::gil_scoped_acquire gil;
  cb.on_kernel_refusal(py::str(op_name), py::str(reason));
}

void report_strided_write(const c10::FunctionSchema& schema) {
  const ExecutorCallbacks& cb = callbacks();
  py::gil_scoped_acquire gil;
  cb.on_strided_write(py::str(schema.name()), py::str(schema.overload_name()));
}

}  // namespace localneuron
