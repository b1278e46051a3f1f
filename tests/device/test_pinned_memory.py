"""Pinned host memory: pin_memory(), is_pinned(), pinned factories, DataLoader(pin_memory=True),
non_blocking copies, the host allocator's statistics, page-locking (and its graceful refusal), and
DDP's unused-parameter path (its staging buffer must be pinned), each against the CPU."""
import ctypes
import resource
import subprocess
import sys
import textwrap

import torch
import torch.nn as nn
import torch.nn.functional as F

from distributed_launcher import run

PR_CAPBSET_DROP = 24
CAP_IPC_LOCK = 14


def test_pin_memory_copies_into_pinned_host_memory():
    x = torch.randn(3, 5)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    assert pinned.device.type == "cpu" and pinned.data_ptr() != x.data_ptr()
    torch.testing.assert_close(pinned, x, rtol=0, atol=0)
    assert pinned.pin_memory() is pinned  # already pinned: no second copy


def test_pin_memory_for_the_neuron_device_and_pinned_factories():
    assert torch.ones(4).pin_memory("neuron").is_pinned()
    assert torch.empty(6, pin_memory=True).is_pinned()
    assert torch.empty_like(torch.ones(2, 3), pin_memory=True).is_pinned()
    assert torch.zeros(8, pin_memory=True)[3:].is_pinned()  # a view inside a pinned block


def test_non_blocking_copies_from_and_to_pinned_memory_match_cpu():
    x = torch.randn(64, 32).pin_memory()
    on_device = x.to("neuron", non_blocking=True)
    back = (on_device * 2).to("cpu", non_blocking=True)
    torch.neuron.synchronize()
    assert back.is_pinned()  # as on CUDA: a non-blocking device-to-host copy lands in pinned memory
    torch.testing.assert_close(back, x * 2, rtol=0, atol=0)


def test_host_statistics_count_pinned_blocks():
    torch.neuron.empty_cache()
    before = torch.neuron.host_memory_stats()
    pinned = torch.ones(3000).pin_memory()  # 12000 bytes -> one 16 KiB block
    during = torch.neuron.host_memory_stats()
    assert during["active_requests.current"] == before["active_requests.current"] + 1
    assert during["active_bytes.current"] == before["active_bytes.current"] + 16384
    assert during["allocated_bytes.current"] >= during["active_bytes.current"]
    assert torch.neuron.memory_stats()["host_active_bytes.current"] == during["active_bytes.current"]
    del pinned
    after_free = torch.neuron.host_memory_stats()
    assert after_free["active_bytes.current"] == before["active_bytes.current"]
    assert after_free["allocated_bytes.current"] == during["allocated_bytes.current"]  # cached for reuse
    torch.ones(4000).pin_memory()  # same rounded size: the cached block is reused
    assert torch.neuron.host_memory_stats()["num_host_alloc"] == during["num_host_alloc"]
    torch.neuron.empty_cache()
    released = torch.neuron.host_memory_stats()
    assert released["allocated_bytes.current"] == released["active_bytes.current"]
    assert released["num_host_free"] > after_free["num_host_free"]


def test_pinned_blocks_are_page_locked():
    torch.neuron.empty_cache()
    pinned = torch.ones(1 << 16).pin_memory()
    stats = torch.neuron.host_memory_stats()
    locked_kib = int(next(line for line in open("/proc/self/status") if line.startswith("VmLck:")).split()[1])
    assert stats["locked_bytes"] + stats["lock_refusals"] > 0
    if stats["lock_refusals"] == 0:
        assert locked_kib * 1024 >= stats["locked_bytes"] >= pinned.nbytes
    del pinned


def _no_page_locking():
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    ctypes.CDLL(None, use_errno=True).prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0)  # root would ignore the limit


def test_refused_page_locking_still_gives_pinned_memory():
    script = textwrap.dedent("""
        import torch
        x = torch.arange(5000.)
        pinned = x.pin_memory()
        stats = torch.neuron.host_memory_stats()
        assert pinned.is_pinned() and torch.equal(pinned, x), "not pinned"
        assert stats["lock_refusals"] == 1 and stats["locked_bytes"] == 0, stats
        assert torch.equal(pinned.to("neuron", non_blocking=True).cpu(), x)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], preexec_fn=_no_page_locking, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_dataloader_pins_batches_for_neuron():
    data = torch.utils.data.TensorDataset(torch.arange(20.).reshape(10, 2), torch.arange(10))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True, pin_memory_device="neuron")
    batches = list(loader)
    assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
    reference = list(torch.utils.data.DataLoader(data, batch_size=4))
    for (x, y), (rx, ry) in zip(batches, reference):
        assert torch.equal(x.to("neuron", non_blocking=True).cpu(), rx) and torch.equal(y, ry)


class PartlyUsed(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(8, 8)
        self.unused = nn.Linear(8, 8)

    def forward(self, x):
        return self.used(x)


def ddp_with_unused_parameters(device: str) -> dict:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = PartlyUsed().to(device)
    wrapped = DDP(model, find_unused_parameters=True)  # Trainer's default under torchrun
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(3):
        g = torch.Generator().manual_seed(100 * step + dist.get_rank())
        x, y = torch.randn(4, 8, generator=g).to(device), torch.randn(4, 8, generator=g).to(device)
        loss = F.mse_loss(wrapped(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"losses": losses, "params": {n: p.detach().cpu() for n, p in model.named_parameters()}}


def test_ddp_find_unused_parameters_matches_cpu_gloo():
    for rank, result in enumerate(run(__file__, "ddp_with_unused_parameters", 2)):
        got, want = result["neuron"], result["cpu"]
        torch.testing.assert_close(got["losses"], want["losses"], msg=lambda m: f"rank {rank}: {m}")
        for name in want["params"]:
            torch.testing.assert_close(got["params"][name], want["params"][name], msg=lambda m: f"{name}: {m}")
