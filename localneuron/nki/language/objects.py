"""Python objects a kernel may carry: NKIObject (user classes) and par_dim (legacy shape marker)."""


class NKIObject:
    """Base of user classes whose instances a kernel may create, pass and read (configuration records,
    tile iterators). AWS's NKI compiler only accepts objects of such classes inside kernels; kernels run
    as Python here, so the base adds no behaviour, and any class deriving from it works in kernels."""


class par_dim(int):
    """Legacy (neuronxcc.nki) marker of the partition dimension in a shape: `(nl.par_dim(128), 512)`.
    It is the number itself; NKI >= 0.3 shapes put the partition dimension first without a marker."""

    def __repr__(self):
        return f"par_dim({int(self)})"
