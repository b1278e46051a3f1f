"""`localneuron estimate --script train.py [ARGS...] --world-size N`: the user's own training script,
run without the hardware and priced as it would run on N NeuronCores.

One process per distinct role runs the script as rank r of a simulated process group of N ranks
(simulated_group.py): its `neuron` tensors are fake (shapes, no memory), host tensors are real, and
every collective completes at once. So what is priced is the script's own model, FSDP2 / tensor /
pipeline wrapping, optimizer and shapes. Ranks that differ only in their data-parallel or
tensor-parallel coordinate do the same work, so one of them runs; pipeline stages differ, so the first
rank of each stage runs. The script runs until its second optimizer step ends (the first step creates
the optimizer state; the second is every later step) and that step is priced:

- each stretch of forward, backward or optimizer ops as one compiled graph (the cost model's rules);
- each collective by its kind, bytes and the placement of its group's ranks (which share an instance);
  a collective issued asynchronously (FSDP2's parameter all-gathers and gradient reduce-scatters) runs
  under the step's compute, the rest (tensor-parallel collectives) between the ops that need them;
- the peak of live device bytes during the step, against the NeuronCore's HBM;
- with pipeline stages, the slowest stage plus the 1F1B bubble, (stages - 1) micro-batches of it.

The run is dry: the script's file writes go to a private directory (PrivateWrites), a host read of a
device value answers what a healthy run reads (HEALTHY_READS), and the worker exits once its step is
priced, is bounded in time, and is killed with the estimate (docs/estimate.md says what the script sees).
"""
import argparse
import contextlib
import errno
import json
import math
import os
import pickle
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import types
from collections import defaultdict
from pathlib import Path

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten, tree_map

from localneuron.estimate.trace import Trace
from localneuron.ops import op_records
from localneuron.ops.op_records import names_with
from localneuron.runtime.units import seconds_text

STEPS = 2
# a rank's dry run of the largest models takes minutes: one that runs an hour never reaches its priced step
WORKER_TIMEOUT_S = 3600
# c10d and functional-collective op ("c10d::allreduce_") -> Collective(kind, which operands' bytes count), from
# the op records' `collective` field
COLLECTIVES = names_with("collective")
COLLECTIVE_RESULTS = names_with("collective_result")


# A host read of a device value (`if not torch.isfinite(loss)`, `loss.item()`) answers what a healthy
# run reads: values are finite. Outputs whose healthy value an op implies carry it (HEALTHY_VALUE), from
# its operands': the op records' `healthy_read` field names the rule (HEALTHY_RULES), rule(args) giving True,
# False or None (not implied). Every other read is 0 / False.
HEALTHY_VALUE = "_localneuron_healthy_value"


def _known(a):
    return getattr(a, HEALTHY_VALUE, None) if isinstance(a, torch.Tensor) else None


def _both(combine):
    def rule(args):
        a, b = _known(args[0]), _known(args[1])
        return None if a is None or b is None else combine(a, b)
    return rule


def _compared_with_itself_or_infinity(equal: bool):
    """x == x is true unless x is NaN, x == inf false for a finite x (isfinite decomposes into these)."""
    def rule(args):
        if args[0] is args[1]:
            return equal
        infinite = isinstance(args[1], (int, float)) and math.isinf(args[1])
        return (not equal) if infinite else None
    return rule


def _negated(args):
    known = _known(args[0])
    return None if known is None else not known


HEALTHY_RULES = {
    op_records.READS_TRUE: lambda args: True,
    op_records.READS_FALSE: lambda args: False,
    op_records.READS_EQUAL_TO_ITSELF: _compared_with_itself_or_infinity(True),
    op_records.READS_UNEQUAL_TO_ITSELF: _compared_with_itself_or_infinity(False),
    op_records.READS_NEGATED: _negated,
    op_records.READS_BOTH: _both(lambda a, b: a and b),
    op_records.READS_EITHER: _both(lambda a, b: a or b),
    op_records.READS_EXACTLY_ONE: _both(lambda a, b: a != b),
    op_records.READS_ITS_INPUT: lambda args: _known(args[0]),
    op_records.READS_SELECTED:
        lambda args: None if _known(args[0]) is None else _known(args[1] if _known(args[0]) else args[2]),
}
# op ("aten::isfinite") -> its rule
HEALTHY_READS = {op: HEALTHY_RULES[rule] for op, rule in names_with("healthy_read").items()}


def _host_read(tensor: torch.Tensor):
    known = _known(tensor)
    value = bool(known) if known is not None else False
    return value if tensor.dtype == torch.bool else float(value) if tensor.is_floating_point() else int(value)


class ScriptEndedEarly(Exception):
    """The script ended before its priced step: the reason, for the user."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT reached the estimate: its worker is killed and its temporary directory removed on
    the way out."""
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class StopScript(BaseException):
    """Raised when the priced step has ended (a BaseException, so the script's `except Exception` lets
    it through)."""


def _on_device(flat) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    for a in flat:
        if isinstance(a, torch.Tensor) and (isinstance(a, FakeTensor) or a.device.type == "neuron"):
            return True
        if isinstance(a, torch.device) and a.type == "neuron" or isinstance(a, str) and a.startswith("neuron"):
            return True
    return False


def _real_device_tensor(a) -> bool:
    """A plain device tensor with storage (subclasses such as DTensor unwrap themselves)."""
    return type(a) in (torch.Tensor, torch.nn.Parameter) and a.device.type == "neuron"


def _overlapped(asynchronous: bool) -> bool:
    """Whether a collective runs under the compute: issued asynchronously, or by FSDP, which issues its
    parameter all-gathers and gradient reduce-scatters on streams of their own (prefetching the next
    layer's parameters while this one computes)."""
    if asynchronous:
        return True
    frame = sys._getframe(2)
    while frame is not None:
        if f"{os.sep}distributed{os.sep}fsdp{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _group_ranks(func, args) -> tuple:
    import torch.distributed as dist

    group = next((a for a in args if isinstance(a, torch._C._distributed_c10d.ProcessGroup)), None)
    if group is None:   # a functional collective names its group last
        names = [a for a in args if isinstance(a, str)]
        group = dist.distributed_c10d._resolve_process_group(names[-1]) if names else dist.group.WORLD
    return tuple(dist.get_process_group_ranks(group))


class ScriptTrace(Trace):
    """One rank's run of the script: device ops recorded (under FakeTensorMode), host ops run for real,
    collectives recorded with their group, phases and steps from the autograd and optimizer hooks."""
    def __init__(self, fake_mode):
        super().__init__()
        self.fake = fake_mode
        self.step_starts = [0]          # index into phases where each step begins
        self.alive_at_end = set()
        self.parameter_count = 0
        self.optimizer = None
        self.backward_calls = []        # per step
        self.step_base = {}             # the storages alive when the priced step began: key -> bytes
        self.training_peak_bytes = 0    # the most live device bytes during its forward and backward

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = tree_flatten((args, kwargs))[0]
        if not _on_device(flat):
            return func(*args, **kwargs)
        if any(is_traceable_wrapper_subclass(a) for a in flat):
            # a DTensor (or another wrapper) runs the op as local ops on its shards, which come back here: what
            # a rank computes is those, not the op at the global shape
            return NotImplemented
        if any(_real_device_tensor(a) for a in flat):   # made where no mode saw it (inside C++): its shape suffices
            args, kwargs = tree_map(self._as_fake, (args, kwargs))
        if func is torch.ops.aten._local_scalar_dense.default:
            return _host_read(args[0])
        if func._schema.name in COLLECTIVE_RESULTS:   # the collective has completed: its output as is
            return args[0]
        if func.namespace in ("c10d", "_c10d_functional"):
            if func._schema.name in COLLECTIVES:
                self._record_collective(COLLECTIVES[func._schema.name], func, args)
            with self.fake:
                return func(*args, **kwargs)
        with self.fake:
            out = super().__torch_dispatch__(func, types, args, kwargs)
        rule = HEALTHY_READS.get(func._schema.name)
        if rule is not None and isinstance(out, torch.Tensor) and (known := rule(args)) is not None:
            setattr(out, HEALTHY_VALUE, known)
        return out

    def _record_collective(self, collective: op_records.Collective, func, args) -> None:
        kind, side = collective.kind, collective.counted
        tensors = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor)]
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        if kind in ("all_gather", "reduce_scatter") and len(tensors) >= 2:
            half = len(tensors) // 2   # (outputs, inputs) for c10d, (input,) for funcol
            outs, ins = (tensors[:half], tensors[half:]) if func.namespace == "c10d" else ([], tensors)
            counted = outs if side == op_records.OUTPUTS else ins
            nbytes = sum(t.numel() * t.element_size() for t in (counted or tensors))
        ranks = _group_ranks(func, args)
        if kind == "all_gather" and func.namespace == "_c10d_functional":
            nbytes *= len(ranks)   # the functional op takes this rank's shard; the result is all of them
        asynchronous = func.namespace == "c10d" and any(a is True for a in args)
        self.phase.collectives.append((kind, nbytes, ranks, _overlapped(asynchronous)))

    def heard(self, kind: str, outputs: list, inputs: list, group, asynchronous: bool) -> None:
        """A collective called on the simulated group directly (c10d's Python-group path)."""
        import torch.distributed as dist

        if not _on_device(outputs + inputs) or kind == "barrier":
            return
        side = outputs if kind == "all_gather" else inputs
        nbytes = sum(t.numel() * t.element_size() for t in side)
        self.phase.collectives.append((kind, nbytes, tuple(dist.get_process_group_ranks(group)),
                                       _overlapped(asynchronous)))

    def _as_fake(self, a):
        return self.fake.from_tensor(a) if _real_device_tensor(a) else a

    # --- hooks ------------------------------------------------------------------------------------
    def backward_begins(self) -> None:
        self.backward_calls[-1:] = [self.backward_calls[-1] + 1] if self.backward_calls else [1]
        self.begin("backward")

    def optimizer_begins(self, optimizer) -> None:
        if self.optimizer is None:
            self.optimizer = optimizer
            seen = {}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    seen[id(p)] = p.numel()
            self.parameter_count = sum(seen.values())
        if optimizer is self.optimizer:
            if len(self.step_starts) == STEPS:   # the forward and backward of the priced step are over
                self.training_peak_bytes = self.peak_bytes
            self.begin("optimizer")

    def optimizer_ends(self, optimizer) -> None:
        if optimizer is not self.optimizer:
            return
        self.step_starts.append(len(self.phases))
        self.begin("forward")
        self.backward_calls.append(0)
        if len(self.step_starts) > STEPS:
            self.release_dead()
            self.alive_at_end = {key for ref, key, _ in self._storages.values() if not ref.expired()}
            raise StopScript()
        if len(self.step_starts) == STEPS:   # the priced step begins: its peak starts from what lives now
            self.release_dead()
            self.peak_bytes = self.live_bytes
            self.step_base = {key: nbytes for ref, key, nbytes in self._storages.values() if not ref.expired()}


# --- the script's files ---------------------------------------------------------------------------------
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# audit events that change the filesystem -> positions of the paths they change (os.replace is os.rename)
MUTATIONS = {"os.remove": (0,), "os.rename": (0, 1), "os.truncate": (0,), "os.rmdir": (0,), "os.mkdir": (0,),
             "shutil.rmtree": (0,), "os.link": (1,), "os.symlink": (1,), "os.chmod": (0,), "os.chown": (0,),
             "os.utime": (0,), "os.setxattr": (0,), "os.removexattr": (0,)}


class PrivateWrites:
    """The dry run's file writes, kept from the files the script would write on real hardware (a checkpoint
    torch.save would truncate and then fail to fill with fake tensors, a log): every path the script opens
    to write (open, os.open, torch.save), makes (os.mkdir) or renames to maps into `root`, mirroring its
    absolute path; a later read or stat (os.path.exists, isdir...) of a path the run made reads that copy
    (listing a directory does not see them). A file of the user's the script removes (os.remove: a
    checkpoint rotation) is hidden from the run, not removed. An audit hook refuses any other change to
    the filesystem outside `root` (truncating, renaming the user's files, removing a tree). `root` is
    discarded with the estimate's temporary directory."""
    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self.written = set()   # the script's files whose writes went to `root`
        # those files, the directories the script made and the files it removed: a path in `root` stands
        # for each (the copy, or nothing where it removed the file)
        self.made = set()

    def _inside(self, path) -> bool:
        real = os.path.realpath(os.fsdecode(path))
        return real == self.root or real.startswith(self.root + os.sep)

    def _copy_of(self, path) -> str:
        return os.path.join(self.root, os.path.abspath(os.fsdecode(path)).lstrip(os.sep))

    def target(self, path, keep_contents: bool = False):
        """Where a write to `path` goes; `keep_contents`: the write appends or updates, so the copy starts
        as the original."""
        if isinstance(path, int) or self._inside(path):
            return path
        copy = self._copy_of(path)
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        original = os.path.abspath(os.fsdecode(path))
        if keep_contents and original not in self.made and os.path.isfile(original):
            shutil.copyfile(original, copy)
        self.written.add(original)
        self.made.add(original)
        return copy

    def source(self, path):
        """What a read of `path` reads: the copy when the run made it."""
        if isinstance(path, int) or os.path.abspath(os.fsdecode(path)) not in self.made:
            return path
        return self._copy_of(path)

    def install(self) -> None:
        import builtins
        import io

        real_open, real_os_open, real_stat = io.open, os.open, os.stat
        real_mkdir, real_rename, real_replace = os.mkdir, os.rename, os.replace
        real_remove, real_unlink = os.remove, os.unlink

        def open_(file, mode="r", *args, **kwargs):
            if any(c in mode for c in "wax+"):
                return real_open(self.target(file, keep_contents=any(c in mode for c in "a+")), mode, *args, **kwargs)
            return real_open(self.source(file), mode, *args, **kwargs)

        def os_open(path, flags, *args, **kwargs):
            if flags & WRITE_FLAGS:
                return real_os_open(self.target(path, keep_contents=not flags & os.O_TRUNC), flags, *args, **kwargs)
            return real_os_open(self.source(path), flags, *args, **kwargs)

        def mkdir(path, *args, **kwargs):
            if self._inside(path):
                return real_mkdir(path, *args, **kwargs)
            copy = self._copy_of(path)
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            real_mkdir(copy, *args, **kwargs)
            self.made.add(os.path.abspath(os.fsdecode(path)))

        def stat(path, *args, **kwargs):
            return real_stat(self.source(path), *args, **kwargs)

        def renamer(rename):
            def moved(src, dst, *args, **kwargs):
                return rename(self.source(src), self.target(dst), *args, **kwargs)
            return moved

        def remover(remove):
            def removed(path, *args, **kwargs):
                if isinstance(path, int) or self._inside(path) or os.path.abspath(os.fsdecode(path)) in self.made:
                    return remove(self.source(path), *args, **kwargs)
                if os.path.isdir(path):   # what the call itself would refuse, refused the same way
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
                os.lstat(path)   # FileNotFoundError when there is nothing to remove
                self.made.add(os.path.abspath(os.fsdecode(path)))
            return removed
        builtins.open = io.open = open_
        os.open, os.mkdir, os.stat = os_open, mkdir, stat
        os.rename, os.replace = renamer(real_rename), renamer(real_replace)
        os.remove, os.unlink = remover(real_remove), remover(real_unlink)
        self._redirect_torch_save()
        sys.dont_write_bytecode = True   # nor the bytecode caches of its modules
        sys.addaudithook(self._refuse_mutations_outside)

    def _redirect_torch_save(self) -> None:
        """torch.save opens a path it is given in C++ (no Python open to map) and cannot pickle fake
        tensors: the path maps into `root`, and each device tensor is written as an empty placeholder of
        its shape and dtype (nothing reads the copy but the run itself)."""
        real_save = torch.serialization.save
        placeholders = types.ModuleType("pickle_with_placeholders")
        placeholders.__dict__.update(vars(pickle))
        placeholders.Pickler = _PlaceholderPickler

        def save(obj, f, pickle_module=None, *args, **kwargs):   # the script's pickle_module gives way
            if isinstance(f, (str, bytes, os.PathLike)):
                f = self.target(f)
            return real_save(obj, f, placeholders, *args, **kwargs)
        torch.save = torch.serialization.save = save

    def _refuse_mutations_outside(self, event: str, args: tuple) -> None:
        if event == "open":
            paths = [args[0]] if args[2] & WRITE_FLAGS else []
        else:
            paths = [args[i] for i in MUTATIONS.get(event, ())]
        for path in paths:
            if isinstance(path, (str, bytes, os.PathLike)) and not self._inside(path):
                raise PermissionError(f"`estimate --script` dry runs do not write the script's files: {event} "
                                      f"{os.fsdecode(path)!r} refused (the run's writes go to {self.root}, "
                                      f"discarded after the estimate)")


def _placeholder(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


class _PlaceholderPickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor) and _on_device([obj]):
            return _placeholder, (tuple(obj.shape), obj.dtype)
        return NotImplemented


def _register_flex_attention() -> None:
    """FlexAttention (TorchTitan's default) is a higher-order op: on the trace it runs its fake kernel and
    is priced as the device's fused attention, forward and backward (a causal block mask on Trainium is
    the fused kernel's causal flag)."""
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    def forward(mode, query, key, value, *args, **kwargs):
        with mode.fake:
            out = flex_attention(query, key, value, *args, **kwargs)
        mode.record("aten::_scaled_dot_product_fused_attention_overrideable", [query, key, value], [out[0]])
        return out

    def backward(mode, query, key, value, out, logsumexp, grad_out, *args, **kwargs):
        with mode.fake:
            grads = flex_attention_backward(query, key, value, out, logsumexp, grad_out, *args, **kwargs)
        mode.record("aten::_scaled_dot_product_fused_attention_overrideable_backward",
                    [query, key, value, out, grad_out], [g for g in grads[:3] if isinstance(g, torch.Tensor)])
        return grads
    if ScriptTrace not in flex_attention.python_key_table:
        flex_attention.py_impl(ScriptTrace)(forward)
        flex_attention_backward.py_impl(ScriptTrace)(backward)


def _install_hooks(trace: ScriptTrace) -> None:
    resize = torch.UntypedStorage.resize_

    def resize_(storage, nbytes):
        result = resize(storage, nbytes)
        trace.resized(storage, nbytes)
        return result
    torch.UntypedStorage.resize_ = resize_
    depth = [0]   # Tensor.backward calls torch.autograd.backward: one backward, counted once

    def phase_of(run):
        def backward(*args, **kwargs):
            depth[0] += 1
            if depth[0] == 1:
                trace.backward_begins()
            try:
                return run(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    trace.begin("forward")
        return backward
    torch.autograd.backward = phase_of(torch.autograd.backward)
    torch.Tensor.backward = phase_of(torch.Tensor.backward)
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(lambda opt, a, k: trace.optimizer_begins(opt))
    register_optimizer_step_post_hook(lambda opt, a, k: trace.optimizer_ends(opt))


def _simulation_settings() -> None:
    """What the simulation changes in PyTorch for the run: random values of sharded tensors come from
    the local generator (DTensor's offset tracker reads generator states the fake device lacks), and
    torch.compile runs its regions eagerly (they are priced as compiled graphs anyway)."""
    import torch.distributed.tensor._dispatch as dtensor_dispatch
    import torch.distributed.tensor._random as dtensor_random

    for module in (dtensor_dispatch, dtensor_random):
        module.is_rng_supported_mesh = lambda mesh: False
    torch.compile = lambda model=None, *args, **kwargs: model if model is not None else (lambda fn: fn)


def launcher_environment(world: int, rank: int, per_instance: int) -> dict:
    """The variables torchrun gives `rank` of a launch of `world` ranks filling instances of `per_instance`
    NeuronCores in turn (the last instance holds the remainder), as strings."""
    instance = rank // per_instance
    on_instance = min(per_instance, world - instance * per_instance)
    variables = dict(RANK=rank, WORLD_SIZE=world, LOCAL_RANK=rank % per_instance, LOCAL_WORLD_SIZE=on_instance,
                     GROUP_RANK=instance, NODE_RANK=instance, GROUP_WORLD_SIZE=-(-world // per_instance),
                     ROLE_NAME="default", ROLE_RANK=rank, ROLE_WORLD_SIZE=world, NGPU=world,
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=29500, TORCHELASTIC_RUN_ID="localneuron-estimate",
                     TORCHELASTIC_RESTART_COUNT=0, TORCHELASTIC_MAX_RESTARTS=0)
    return {name: str(value) for name, value in variables.items()}


def run_rank(script: str, argv: list, world: int, rank: int, per_instance: int) -> ScriptTrace:
    """Runs the script as `rank` of `world` and returns its trace (in this process)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from localneuron.estimate import simulated_group

    os.environ.update(launcher_environment(world, rank, per_instance))
    simulated_group.install(world, rank)
    _simulation_settings()
    _register_flex_attention()
    trace = ScriptTrace(FakeTensorMode(allow_non_fake_inputs=True))
    _install_hooks(trace)
    simulated_group.listeners.append(trace.heard)
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with trace:
            runpy.run_path(script, run_name="__main__")
    except StopScript:
        pass
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            raise ScriptEndedEarly(f"--script {script} exited with status {exit_.code} before its second optimizer "
                                   f"step") from None
    if len(trace.step_starts) <= STEPS:
        raise ScriptEndedEarly(f"--script {script} ended after {len(trace.step_starts) - 1} optimizer step(s): the "
                               f"estimate prices its second one, so let it run at least {STEPS} steps")
    return trace


# --- pricing one rank's step ---------------------------------------------------------------------------
def _placement(ranks: tuple, per_instance: int):
    from localneuron.costmodel.collectives import Group

    by_instance = defaultdict(int)
    for r in ranks:
        by_instance[r // per_instance] += 1
    local = max(by_instance.values())
    return Group(len(ranks), local, concurrent_groups=max(1, per_instance // local))


def _collective_seconds(chip, kind: str, nbytes: float, ranks: tuple) -> float:
    from localneuron.costmodel import collectives

    if len(ranks) <= 1:
        return 0.0
    if kind in ("send", "recv"):
        return collectives.send_recv(chip, nbytes, across_instances=len({r // chip.cores_per_instance for r in ranks}) > 1)
    algorithm = collectives.C10D_ALGORITHMS.get(kind, collectives.all_gather)
    return algorithm(chip, nbytes, _placement(ranks, chip.cores_per_instance))


def price_rank(trace: ScriptTrace, chip) -> dict:
    """The priced step of one rank: time and its breakdown, collectives by kind, peak HBM."""
    from localneuron.costmodel import ops as cost_ops
    from localneuron.costmodel.engines import Attention, op_work, rule
    from localneuron.costmodel.time import Breakdown

    phases = trace.phases[trace.step_starts[STEPS - 1]:trace.step_starts[STEPS]]
    read_later = [set() for _ in phases]
    read = set()
    for i in range(len(phases) - 1, -1, -1):   # keys each phase's successors read
        read_later[i] = set(read)
        read.update(key for op in phases[i].ops for key, _ in op.inputs)
    total, asynchronous = Breakdown(), 0.0
    graphs_by_phase = defaultdict(float)
    # the engine seconds of the step's attention ops (forward and backward), to compare with another source's
    attention_s = sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).compute_s
                      for phase in phases for op in phase.ops if isinstance(rule(op.name), Attention))
    by_kind = defaultdict(lambda: {"calls": 0, "bytes": 0, "seconds": 0.0, "group_sizes": set()})
    for phase, later in zip(phases, read_later):
        produced = {key for op in phase.ops for key, _ in op.outputs}
        outputs = {key for key in produced if key in later or key in trace.alive_at_end}
        if phase.ops:
            graph = cost_ops.graph(chip, phase.ops, outputs)
            total += graph
            graphs_by_phase[phase.name] += graph.total
        for kind, nbytes, ranks, is_async in phase.collectives:
            seconds = _collective_seconds(chip, kind, nbytes, ranks)
            entry = by_kind[kind]
            entry["calls"] += 1
            entry["bytes"] += nbytes
            entry["seconds"] += seconds
            entry["group_sizes"].add(len(ranks))
            if is_async:
                asynchronous += seconds
            else:
                total.collectives += seconds
    # asynchronous collectives (FSDP2's prefetched all-gathers, its reduce-scatters) run under the compute
    total.collectives += max(0.0, asynchronous - (total.compute + total.memory))
    fallbacks = dict(trace.fallback_ops)
    # the peak a training step reaches, while its forward and backward hold the activations, of every storage
    # but those the script's set-up left behind: alive when the step began and still at its end, read by none
    # of its ops (a real run's allocator reuses them). What the step reads counts, the optimizer's state and
    # the model's weights alike, also weights an optimizer of fp32 master copies does not hold
    left_behind = sum(nbytes for key, nbytes in trace.step_base.items()
                      if key in trace.alive_at_end and key not in read)
    peak = trace.training_peak_bytes - left_behind
    # the graphs' seconds by phase (forward, backward, optimizer; collectives not included): what the step's
    # parts cost, to compare with another source's forward, backward and optimizer step
    return {"step_s": total.total, "breakdown": total.as_dict(), "graphs_by_phase_s": dict(graphs_by_phase),
            "attention_s": attention_s,
            "peak_bytes": peak,
            "collectives": {k: {**v, "group_sizes": sorted(v["group_sizes"])} for k, v in by_kind.items()},
            "asynchronous_collective_s": asynchronous, "parameters": trace.parameter_count,
            "micro_batches": max(1, trace.backward_calls[STEPS - 1] if len(trace.backward_calls) >= STEPS else 1),
            "fallbacks": fallbacks, "computed_in_32bit": dict(trace.computed_in_32bit),
            "groups": _groups(trace)}


def _groups(trace) -> dict:
    """The process groups this rank belongs to: description (DeviceMesh names them mesh_<dim>) -> ranks."""
    import torch.distributed as dist

    found = {}
    for group, ranks in dist.distributed_c10d._world.pg_group_ranks.items():
        if dist.get_rank() in ranks and len(ranks) > 1 and group is not dist.group.WORLD:
            found[group.group_desc or group.group_name] = sorted(ranks)
    return found


# --- the worker and the orchestration ------------------------------------------------------------------
def worker(argv: list) -> None:
    """`python -m localneuron.estimate.script --rank R --world N --target T --lnc L --stack S --out OUT --writes DIR --
    SCRIPT ARGS`: writes the priced step (or {"error": why the script cannot be priced}) to OUT, nothing
    when the script fails, and exits."""
    parser = argparse.ArgumentParser(prog="localneuron.estimate.script")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--lnc", type=int, required=True)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--writes", required=True, help="the private directory the script's writes go to")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    from localneuron.estimate.layout import target_chip

    chip = target_chip(args.target, args.lnc, args.stack)
    result = open(args.out, "w")   # before the script runs: from then on every write outside DIR is the script's
    writes = PrivateWrites(args.writes)
    writes.install()
    status = 0
    try:
        trace = run_rank(args.script, args.args, args.world, args.rank, chip.cores_per_instance)
        answer = {**price_rank(trace, chip), "redirected_writes": sorted(writes.written)}
    except ScriptEndedEarly as error:
        answer = {"error": str(error)}
    except BaseException:   # the script's own failure, reported as Python would (torch.distributed names the rank)
        sys.excepthook(*sys.exc_info())
        answer, status = None, 1
    if answer is not None:
        result.write(json.dumps(answer))
    result.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)   # without waiting for threads the script started and left running


def _run_worker(script: str, argv: list, world: int, rank: int, chip, directory: str) -> dict:
    out = os.path.join(directory, f"rank{rank}.json")
    writes = os.path.join(directory, f"rank{rank}-writes")
    os.mkdir(writes, 0o700)
    command = [sys.executable, "-m", "localneuron.estimate.script", "--rank", str(rank), "--world", str(world),
               "--target", chip.name, "--lnc", str(chip.lnc), "--stack", chip.stack, "--out", out, "--writes", writes,
               script, *argv]
    # the script's own output stays visible; its temporary files are the dry run's; in a session of its own,
    # so the worker and whatever it starts are stopped together
    process = subprocess.Popen(command, stdout=sys.stderr, stderr=sys.stderr, env={**os.environ, "TMPDIR": writes},
                               start_new_session=True)
    try:
        status = process.wait(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ValueError(f"--script {script} ran as rank {rank} of {world} for {seconds_text(WORKER_TIMEOUT_S)} "
                         f"without ending its second optimizer step: stopped") from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if status:
        raise ValueError(f"--script {script} failed as rank {rank} of {world} (exit status {status}); "
                         f"its output is above")
    answer = Path(out).read_text()
    if not answer:
        raise ValueError(f"--script {script} exited (os._exit) before its second optimizer step: the estimate prices "
                         f"that step, so let it run at least {STEPS} steps")
    answer = json.loads(answer)
    if "error" in answer:
        raise ValueError(answer["error"])
    return answer


@contextlib.contextmanager
def _signals_stop_the_estimate():
    """SIGTERM and SIGINT raise Interrupted, so the worker is killed and the temporary directory removed on
    the way out (signal handlers can only be set from the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum, frame):
        raise Interrupted(signum)
    previous = {signum: signal.signal(signum, interrupted) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def estimate(script: str, argv: list, chip, world: int) -> dict:
    """The script priced on `world` ranks: one run per distinct role (pipeline stage)."""
    if not Path(script).is_file():
        raise ValueError(f"--script {script}: no such file")
    with _signals_stop_the_estimate(), tempfile.TemporaryDirectory(prefix="localneuron-estimate-") as directory:
        first = _run_worker(script, argv, world, 0, chip, directory)
        stages = next((ranks for desc, ranks in first["groups"].items() if desc.endswith("pp")), [0])
        runs = [first] + [_run_worker(script, argv, world, r, chip, directory) for r in stages if r != 0]
    slowest = max(runs, key=lambda r: r["step_s"])
    step = dict(slowest["breakdown"])
    if len(stages) > 1:   # 1F1B: the first micro-batches fill the pipeline, the last drain it
        step["pipeline_bubble"] += (len(stages) - 1) * slowest["step_s"] / slowest["micro_batches"]
    step_s = sum(step.values())
    peak = max(r["peak_bytes"] for r in runs)
    return {"step_s": step_s, "breakdown": step, "ranks_executed": [0] + [r for r in stages if r != 0],
            "stages": len(stages), "rank_results": runs, "peak_bytes": peak, "parameters": first["parameters"],
            "collectives": slowest["collectives"], "fallbacks": slowest["fallbacks"],
            "computed_in_32bit": slowest["computed_in_32bit"], "groups": first["groups"],
            "redirected_writes": sorted({path for r in runs for path in r["redirected_writes"]})}


if __name__ == "__main__":
    # run from the module under its own name, not as __main__ (the name the script itself runs under): what
    # pickles of the run name must resolve
    from localneuron.estimate import script

    script.worker(sys.argv[1:])
