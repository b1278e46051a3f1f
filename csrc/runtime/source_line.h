// Where in the user's Python code a thread issued device work: its innermost frames outside library code, by
// one rule for the whole project, localneuron/runtime/call_sites.py's is_library, handed over once at
// registration (set_library_rule) and asked once per code object. Queued errors ("enqueued at FILE:LINE") and
// the source-line sampler of the portability report both walk frames here, so they never name different lines
// for one op (a queued error pointing into site-packages/transformers while the report blames the user's line).
//
// Lock order: the walk runs with the GIL held and holds no C++ lock while it calls into Python (the rule may
// import modules, and Python may switch threads inside it). A thread that waited for a C++ lock or one-time
// initialiser while holding the GIL, on a thread inside the rule, would never get it back: two threads whose
// first queued ops ran together hung that way when the rule was a C++ static initialiser that imported modules.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

namespace localneuron {

// A Python code object, kept alive for the process once seen here, and an instruction offset in it.
struct SourceLine {
  void* code = nullptr;
  int lasti = -1;
};

// is_library(filename) -> bool. Until it is set, every frame counts as the user's.
void set_library_rule(pybind11::object is_library);

// Up to `max` innermost user frames of the calling thread, innermost first; how many were found. The GIL must
// be held.
int user_frames(SourceLine* out, int max);

// The issuing thread's innermost user frame (its innermost frame if all are library code), or an empty line
// on a thread without Python frames. Takes the GIL.
SourceLine capture_source_line();

// "FILE:LINE", or "" when unknown. Takes the GIL.
std::string source_location(const SourceLine& source);
// " enqueued at FILE:LINE", or "" when unknown.
std::string source_text(const SourceLine& source);

}  // namespace localneuron
