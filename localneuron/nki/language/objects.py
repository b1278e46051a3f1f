"""Python objects a kernel may carry: NKIObject (user classes) and par_dim (legacy shape marker)."""


class NKIObject:
    """Base of user classes whose instances a kernel may create, pass and read (configuration records,
    tile iterators). AWS's NKI compiler only accepts objects of such classes inside kernels; kernels run
    as Python here. A subclass that declares fields (annotations) and no constructor of its own is built
    from them by keyword or in declaration order, as NKI builds it: the NKI Library's MoE kernels write
    `DimensionSizes(T=T, H=H, ...)` for such a record, setting the remaining fields later."""

    def __init__(self, *args, **values):
        # only for a subclass without a constructor of its own (a dataclass, or a class defining __init__, keeps its)
        fields = []
        for base in reversed(type(self).__mro__):
            for name in base.__dict__.get("__annotations__", {}):
                if name not in fields:
                    fields.append(name)
        name = type(self).__name__
        if len(args) > len(fields):
            raise TypeError(f"{name}() takes at most {len(fields)} positional arguments")
        for field, value in zip(fields, args):
            if field in values:
                raise TypeError(f"{name}() got multiple values for {field!r}")
            values[field] = value
        unknown = [field for field in values if field not in fields]
        if unknown:
            raise TypeError(f"{name}() has no field {unknown[0]!r}")
        for field, value in values.items():
            setattr(self, field, value)


class par_dim(int):
    """Legacy (neuronxcc.nki) marker of the partition dimension in a shape: `(nl.par_dim(128), 512)`.
    It is the number itself; NKI >= 0.3 shapes put the partition dimension first without a marker."""

    def __repr__(self):
        return f"par_dim({int(self)})"
