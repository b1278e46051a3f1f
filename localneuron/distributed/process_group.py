"""ProcessGroupNeuron: the `neuron` c10d process group (docs/support-matrix.md#distributed).

Every collective runs on an inner ProcessGroupGloo over host aliases of the device tensors
(`_C.cpu_alias`: same bytes, same strides), so Gloo reads from and writes into device memory with no
copy in between and nothing of ours on the wire. Gloo's own checks (dtypes, sizes, contiguity, reduce
op per dtype) and its timeouts apply unchanged; this class adds TorchNeuron's restrictions, the
device-level ops Gloo lacks (PREMUL_SUM, the *_coalesced tensor variants), and a NeuronWork per call.

A Python ProcessGroup subclass because c10d's Backend cannot be subclassed from Python; c10d then
uses this object as the whole group, for CPU tensors too (those go to Gloo as they are).
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroupGloo

from localneuron import _C
from localneuron.costmodel.work import price_collective
from localneuron.distributed import checks, reduce_ops, stats
from localneuron.distributed.eager import eager_methods
from localneuron.distributed.work import NeuronWork
from localneuron.runtime import line_time, trace_events
from localneuron.runtime.config import selected_target
from localneuron.runtime.environment import read


@eager_methods("_get_backend", "_allgather_base", "_reduce_scatter_base", "_start_coalescing", "_end_coalescing")
class ProcessGroupNeuron(dist.ProcessGroup):
    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta, is_world: bool):
        super().__init__(rank, size)
        self._gloo = ProcessGroupGloo(store, rank, size, timeout)
        self._is_world = is_world
        self._name = ""
        self._desc = ""
        self._where = ""  # how errors name this group; fixed once c10d has named it
        self._rank, self._size = rank, size
        self._coalesced: list[NeuronWork] | None = None  # works issued inside _start/_end_coalescing
        self._ranks_must_agree = read("TORCH_DISTRIBUTED_DEBUG") == "DETAIL"  # read once, as c10d does

    # -- identity: c10d keeps group name/desc on backends; a Python group without any keeps its own --
    def getBackendName(self) -> str:
        return "neuron"

    def setGroupName(self, name: str) -> None:
        self._name = name
        self._name_for_errors()

    def getGroupName(self) -> str:
        return self._name

    def setGroupDesc(self, desc: str) -> None:
        self._desc = desc
        self._name_for_errors()

    def getGroupDesc(self) -> str:
        return self._desc

    def _name_for_errors(self) -> None:
        label = self._desc if self._desc not in ("", "undefined") else self._name  # c10d's default desc
        self._where = f"neuron process group '{label}' (rank {self._rank} of {self._size})"

    def _get_backend(self, device):
        """c10d looks up a device's backend for `init_process_group(device_id=...)` and group splitting; the
        transport answers for every device. Collectives must still go through this group: Gloo takes host
        tensors only."""
        return self._gloo

    # -- reductions --
    def allreduce(self, tensors, opts):
        opts = self._lower_in_place(tensors, opts)
        return self._issue("all_reduce", tensors, tensors, lambda: self._gloo.allreduce(_host(tensors), opts))

    def allreduce_coalesced(self, tensors, opts):
        opts = self._lower_in_place(tensors, opts)
        return self._issue("all_reduce_coalesced", tensors, tensors,
                           lambda: self._gloo.allreduce_coalesced(_host(tensors), opts))

    def reduce(self, tensors, opts):
        opts = self._lower_in_place(tensors, opts)
        return self._issue("reduce", tensors, tensors, lambda: self._gloo.reduce(_host(tensors), opts))

    def reduce_scatter(self, outputs, input_lists, opts):
        if self._coalesced is not None:
            raise NotImplementedError("reduce_scatter_coalesced is not supported by the neuron backend: coalesce "
                                      "reduce_scatter_tensor calls instead.")
        factor = reduce_ops.premul_factor(opts.reduceOp, outputs)
        if factor is not None:
            input_lists, opts = [reduce_ops.scaled(ins, factor) for ins in input_lists], reduce_ops.as_sum(opts)
        return self._issue("reduce_scatter", outputs, input_lists,
                           lambda: self._gloo.reduce_scatter(_host(outputs), _host(input_lists), opts))

    def reduce_scatter_single(self, output, input, opts):
        input, opts = self._lower_copied([input], opts)
        return self._issue("reduce_scatter_tensor", [output], input,
                           lambda: self._gloo._reduce_scatter_base(_host(output), _host(input[0]), opts))

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        inputs, opts = self._lower_copied(inputs, opts)
        return self._issue("reduce_scatter_tensor_coalesced", outputs, inputs, lambda: [
            self._gloo._reduce_scatter_base(o, i, opts) for o, i in zip(_host(outputs), _host(inputs))])

    # -- data movement --
    def broadcast(self, tensors, opts):
        return self._issue("broadcast", tensors, tensors, lambda: self._gloo.broadcast(_host(tensors), opts))

    def allgather(self, output_lists, inputs, opts):
        return self._issue("all_gather", output_lists, inputs,
                           lambda: self._gloo.allgather(_host(output_lists), _host(inputs), opts))

    def allgather_coalesced(self, output_lists, inputs, opts):
        return self._issue("all_gather_coalesced", output_lists, inputs,
                           lambda: self._gloo.allgather_coalesced(_host(output_lists), _host(inputs), opts))

    def all_gather_single(self, output, input, opts):
        # NCCL takes any output of world_size * numel(input) elements (SyncBatchNorm passes a (1, N) one);
        # Gloo wants the ranks' pieces concatenated along dim 0
        stacked = _host(output).view(-1, *input.shape[1:])
        return self._issue("all_gather_into_tensor", [output], [input],
                           lambda: self._gloo._allgather_base(stacked, _host(input), opts))

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        # Gloo's binding has no coalesced variant: one all-gather per pair, one handle for all of them.
        return self._issue("all_gather_into_tensor_coalesced", outputs, inputs, lambda: [
            self._gloo._allgather_base(o, i, opts) for o, i in zip(_host(outputs), _host(inputs))])

    def gather(self, output_lists, inputs, opts):
        return self._issue("gather", output_lists, inputs,
                           lambda: self._gloo.gather(_host(output_lists), _host(inputs), opts))

    def scatter(self, outputs, input_lists, opts):
        return self._issue("scatter", outputs, input_lists,
                           lambda: self._gloo.scatter(_host(outputs), _host(input_lists), opts))

    def alltoall(self, outputs, inputs, opts):
        return self._issue("all_to_all", outputs, inputs,
                           lambda: self._gloo.alltoall(_host(outputs), _host(inputs), opts))

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts):
        for splits in (input_split_sizes, output_split_sizes):
            if len(set(splits)) > 1:
                raise NotImplementedError(
                    "alltoall_base: Only even split sizes are supported. Got "
                    f"input_split_sizes={list(input_split_sizes)}, output_split_sizes={list(output_split_sizes)}")
        return self._issue("all_to_all_single", [output], [input], lambda: self._gloo.alltoall_base(
            _host(output), _host(input), output_split_sizes, input_split_sizes, opts))

    def send(self, tensors, dst, tag):
        return self._issue("send", tensors, tensors, lambda: self._gloo.send(_host(tensors), dst, tag))

    def recv(self, tensors, src, tag):
        return self._issue("recv", tensors, tensors, lambda: self._gloo.recv(_host(tensors), src, tag))

    def barrier(self, opts):
        if not self._is_world:
            raise NotImplementedError(f"Barrier is implemented only for default group, called barrier on {self._where}")
        return self._issue("barrier", [], [], lambda: self._gloo.barrier(opts))

    # Names torch 2.13 still calls on some paths, for the same operations.
    _allgather_base = all_gather_single
    _reduce_scatter_base = reduce_scatter_single
    allgather_into_tensor_coalesced = all_gather_single_coalesced
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced
    alltoall_base = all_to_all_single

    # -- unsupported by TorchNeuron (torch itself refuses monitored_barrier on any backend but Gloo) --
    def recv_anysource(self, *args, **kwargs):
        raise NotImplementedError("recv from any source is not supported by the neuron backend; pass src.")

    # -- coalescing (`_coalescing_manager(device=...)`): one handle for every call made in between --
    def _start_coalescing(self, device) -> None:
        if self._coalesced is not None:
            raise RuntimeError(f"{self._where}: coalescing already started")
        self._coalesced = []

    def _end_coalescing(self, device):
        works, self._coalesced = self._coalesced, None
        if works is None:
            raise RuntimeError(f"{self._where}: _end_coalescing without _start_coalescing")
        return NeuronWork("coalesced", works, [], (), self._where, timed=False) if works else None

    # -- helpers --
    def _lower_in_place(self, tensors, opts):
        """PREMUL_SUM → each rank scales its tensors in place, then SUM (the tensors are outputs anyway)."""
        factor = reduce_ops.premul_factor(opts.reduceOp, tensors)
        if factor is None:
            return opts
        for t in tensors:
            t.mul_(factor)
        return reduce_ops.as_sum(opts)

    def _lower_copied(self, inputs, opts):
        """PREMUL_SUM on read-only inputs: SUM of scaled copies."""
        factor = reduce_ops.premul_factor(opts.reduceOp, inputs)
        if factor is None:
            return inputs, opts
        return reduce_ops.scaled(inputs, factor), reduce_ops.as_sum(opts)

    def _issue(self, kind: str, outputs, inputs, start) -> NeuronWork:
        # all of this is the simulation's work (checks, pricing, handing the bytes to Gloo): on the simulated
        # host clock the host spends no time on it (profiler/host_clock.py)
        traced_from = trace_events.now_ns() if trace_events.recording() else None
        checks.check_call(kind, outputs, inputs)
        if self._ranks_must_agree:
            checks.check_ranks_agree(self._gloo, kind, outputs, inputs, self._where)
        flat_outputs, flat_inputs = checks.flat(outputs), checks.flat(inputs)
        nbytes = max(_nbytes(flat_outputs), _nbytes(flat_inputs))
        priced = price_collective(selected_target(), kind, nbytes, self._size)
        stats.record_issue(kind, nbytes, priced.seconds)
        line_time.note(priced.seconds)
        works = start()
        traced = None
        if traced_from is not None:
            traced = trace_events.record(priced, _device_index(flat_outputs + flat_inputs), traced_from,
                                         bytes=nbytes, ranks=self.size())
        work = NeuronWork(kind, works if isinstance(works, list) else [works], flat_outputs, (outputs, inputs),
                          self._where, traced=traced)
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work


def _host(x):
    """Host aliases of neuron tensors (same bytes), through nested lists; CPU tensors pass as they are."""
    if isinstance(x, torch.Tensor):
        return _C.cpu_alias(x) if x.device.type == "neuron" else x
    return [_host(y) for y in x]


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.nbytes for t in tensors)


def _device_index(tensors: list[torch.Tensor]) -> int:
    return next((t.device.index for t in tensors if t.device.type == "neuron"), _C.current_device())
