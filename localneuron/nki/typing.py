"""`nki.typing`: annotations for kernel parameters.

`nt.tensor` is a tensor the kernel reads; `nt.mutable_tensor` one it may write in place (its writes are
visible to the caller, as every kernel argument's are on the simulator). Both may be subscripted with a
shape and dtype (`nt.tensor[[128, 512], nl.bfloat16]`) for documentation; nothing is checked from them.
"""
from .tensor import NkiTensor


class _Annotation:
    def __init__(self, name, mutable):
        self.name = name
        self.mutable = mutable

    def __getitem__(self, _shape_and_dtype):
        return self

    def __instancecheck__(self, value):
        return isinstance(value, NkiTensor)

    def __repr__(self):
        return f"nki.typing.{self.name}"


tensor = _Annotation("tensor", mutable=False)
mutable_tensor = _Annotation("mutable_tensor", mutable=True)
