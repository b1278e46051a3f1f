"""The ops Adaptive Eager may fuse: those whose generated code gives the same bits as ATen's kernel.
tests/execution/test_adaptive_eager.py checks every entry against unfused eager on every dtype its rule
admits, with every pair of signed zeros, NaNs with payloads (negative, signalling), infinities, denormals
and extremes as operands and as Python numbers, in ATen's vector loop, its scalar tail and its strided
loop. NaNs match as NaNs: the generated code may return another NaN encoding (sign, payload) than ATen's
kernel, which IEEE 754 leaves open. Complex operands are never fused (csrc/fusion/fusion.cpp
is_fusible_call): ATen adds and subtracts complex numbers as a + alpha * b with alpha = 1 + 0j, which
turns an infinite part into NaN where the generated code adds straight.

Each entry's rule: ANY (every real dtype), FLOAT32 (not with 16-bit float operands: the generated code and
ATen differ in the last bit there), NUMBERS_FLOAT32 (with a Python number among the arguments only on
float32: ATen rounds the number to the 16-bit type first, the generated code computes with it in float32).
Whatever the rule, a call with 16-bit float operands and a 0-dim tensor of another dtype stays unfused
(csrc/fusion/fusion.cpp is_fusible_call says why).

The entries are the op records' `fusible` fields (localneuron/ops/op_records.py, each with its reason where
it has one); this module derives the tables Adaptive Eager reads from them.

MATMULS below join runs another way: TorchNeuron's concatenation engine targets matmul-heavy sequences and merges
a matmul with the element-wise ops before it into one operator (its tests name them 'mul|pow|aten::mm',
'silu|aten::linear'). Here an element-wise op after a matmul starts a new segment; a segment holding matmuls is one
queue entry whose element-wise ops run as they would alone (generated code where this table admits it) and whose
matmuls run with their own ATen kernels: the same bits as unfused eager on every dtype. The trackers list the segment
once, as a fused operator (csrc/fusion/fusion.h).

Not here, on purpose: reductions, matmuls (for generated code), softmax and norms (the generated code associates sums
differently); transcendentals (exp, log, tanh, sigmoid, silu, gelu: the generated vector code and
ATen's differ in the last bit); sqrt (found 1 ulp apart on float32); integer division (the generated code does not raise on zero); RNG ops
(the stream of random numbers is the eager one only op by op); maximum and minimum (ATen's own kernel
answers (+0, -0) with the first operand in its scalar loops and with the second in its vector loop, so
its result depends on where the element falls, which no generated code can follow); in-place and out=
overloads (a run's outputs must be new tensors); ops taking tensor lists or devices (cat, _to_copy: the run's wiring
knows single tensors and plain values only).
"""

from localneuron.ops.op_records import ANY, FLOAT32, NUMBERS_FLOAT32, fusible_overloads, matmul_segment_ops  # noqa: F401

# "aten::name.overload" (or "aten::name" for the default overload) -> its rule
FUSIBLE_OPS = {op: f.dtypes for op, f in fusible_overloads().items()}

# Values the generated code does not reproduce bit for bit: a run with a call that passes another value
# is not compiled, and runs unfused. op -> (argument, the one value fused)
ONLY_WITH = {op: f.only_with for op, f in fusible_overloads().items() if f.only_with}

# Matmuls (the op records' matmul_segment field; each runs whole, one op, on the device route): they join runs and
# close their segment; each runs with its own kernel (csrc/fusion/fusion.cpp run_matmul_segment).
MATMULS = tuple(matmul_segment_ops())
