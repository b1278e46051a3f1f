// Estimated device time by the user's source line, for the portability report (on by default).
//
// Every op a thread issues adds its estimated device time to a per-thread count-down; when it runs
// out, the sample credits the time it stands for to the user's line that issued the op. The gaps
// between samples are drawn from an exponential distribution (Poisson sampling on the axis of
// estimated device time), so each line's expected credit is exactly its estimated device time and no
// loop period can alias with the sampling. A mean gap of 0 credits every op its own time (exact, slower).
//
// Unless the gap was chosen explicitly, a thread's samples are kept under kMaxSampleShare of its time:
// under deep Python stacks (a Hugging Face generate loop walks ~30 frames, ~3 us per sample) the thread's
// mean gap doubles while a sample costs more than that share of the time since the previous one, and
// halves back while it costs under a quarter of it. A gap's mean is fixed when it is drawn and its sample
// credits that mean; a rate changed at a sample is a fresh draw of a memoryless process, so the expected
// credits are unchanged.
//
// A sample walks the issuing thread's Python frames here and adds to a table keyed by the innermost
// user frames (code object and instruction offset, turned into lines when the table is read; which frames are
// the user's is runtime/source_line.h's one rule); localneuron/runtime/line_time.py
// formats the table. Only a thread without a user frame (the autograd engine's) calls the Python
// sampler, which finds the line that called backward().
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

namespace localneuron {

extern thread_local int64_t t_ns_until_line_sample;
void take_line_samples(int64_t estimated_ns);

// The issuing path's whole cost while no sample is due: one thread-local subtraction.
inline void note_device_time(int64_t estimated_ns) {
  if ((t_ns_until_line_sample -= estimated_ns) <= 0) take_line_samples(estimated_ns);
}

// sampler(credited_ns) is called with the GIL held on a thread whose frames are all library code (or that has
// none). sampler None switches sampling off. bounded_cost: widen the gap where samples are costly (see above).
void set_line_sampler(pybind11::object sampler, int64_t mean_gap_ns, bool bounded_cost);

// The table so far: (code, line, caller code or None, caller line, credited ns) per user line; clear
// empties it.
pybind11::list line_samples(bool clear);
// Samples taken (gaps credited: an op spanning several credits each) since sampling was switched on or the
// table was last cleared.
int64_t line_sample_count();

}  // namespace localneuron
