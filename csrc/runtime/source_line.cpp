#include "runtime/source_line.h"

#include <frameobject.h>

#include <unordered_map>

namespace py = pybind11;

namespace localneuron {
namespace {

py::object* g_is_library = nullptr;  // process lifetime, like the executor's callbacks; set with the GIL held

// Every code object asked about, with the answer. The entries keep their code objects alive: recorded lines
// refer to them after their frames are gone (one per function that issued device work). Used with the GIL held,
// and never across the call into Python: another thread may run inside it.
std::unordered_map<PyCodeObject*, bool> g_library_code;

bool is_library(PyCodeObject* code) {
  auto it = g_library_code.find(code);
  if (it != g_library_code.end()) return it->second;
  bool library = false;
  if (g_is_library != nullptr && !g_is_library->is_none()) {
    try {
      library = (*g_is_library)(py::handle(code->co_filename)).cast<bool>();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("localneuron: which frames are library code");  // the frame counts as the user's
    }
  }
  if (g_library_code.emplace(code, library).second) Py_INCREF(code);
  return library;
}

}  // namespace

void set_library_rule(py::object is_library) {
  if (!is_library.is_none() && !PyCallable_Check(is_library.ptr())) {
    throw py::type_error("set_library_rule: is_library must be callable");
  }
  if (g_is_library == nullptr) g_is_library = new py::object();
  *g_is_library = std::move(is_library);
  g_library_code.clear();  // the answers of the previous rule (their code objects stay alive, as promised)
}

int user_frames(SourceLine* out, int max) {
  int found = 0;
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());
  while (frame != nullptr && found < max) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    if (!is_library(code)) out[found++] = {code, PyFrame_GetLasti(frame)};
    Py_DECREF(code);  // g_library_code holds it
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return found;
}

SourceLine capture_source_line() {
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return {};
  const PyGILState_STATE state = PyGILState_Ensure();
  SourceLine found;
  if (user_frames(&found, 1) == 0) {
    PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());
    if (frame != nullptr) {
      PyCodeObject* code = PyFrame_GetCode(frame);
      is_library(code);  // keeps the code object alive
      found = {code, PyFrame_GetLasti(frame)};
      Py_DECREF(code);
      Py_DECREF(frame);
    }
  }
  PyGILState_Release(state);
  return found;
}

std::string source_location(const SourceLine& source) {
  if (source.code == nullptr || !Py_IsInitialized()) return "";
  py::gil_scoped_acquire gil;
  auto* code = static_cast<PyCodeObject*>(source.code);
  const int line = PyCode_Addr2Line(code, source.lasti);
  return py::reinterpret_borrow<py::object>(code->co_filename).cast<std::string>() + ":" + std::to_string(line);
}

std::string source_text(const SourceLine& source) {
  const std::string location = source_location(source);
  return location.empty() ? "" : " enqueued at " + location;
}

}  // namespace localneuron
