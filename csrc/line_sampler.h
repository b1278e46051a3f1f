// Estimated device time by the user's source line, for the portability report (on by default).
//
// Every op a thread issues adds its estimated device time to a per-thread count-down; when it runs
// out, the sampler (localneuron/profiler/line_time.py) credits the time of the samples taken to the
// user's line that issued the op. The gaps between samples are drawn from an exponential
// distribution (Poisson sampling on the axis of estimated device time), so each line's expected
// credit is exactly its estimated device time and no loop period can alias with the sampling. A mean
// gap of 0 credits every op its own time (exact, slower).
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

// sampler(credited_ns) is called on the issuing thread with the GIL held; None switches sampling off.
void set_line_sampler(pybind11::object sampler, int64_t mean_gap_ns);

}  // namespace localneuron
