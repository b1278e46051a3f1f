"""DDP training on the `neuron` backend, written the way a CUDA script would be
(the reference workflow in docs/support-matrix.md#distributed).

    torchrun --nproc_per_node 2 examples/distributed/ddp_train.py                         # neuron + neuron
    torchrun --nproc_per_node 2 examples/distributed/ddp_train.py --device cpu --backend gloo  # reference

Both runs print the same losses. Two nodes on one machine, joined by a c10d rendezvous on loopback:

    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 1 --rdzv_backend c10d \\
        --rdzv_endpoint 127.0.0.1:29400 --rdzv_id demo examples/distributed/ddp_train.py &
    torchrun --nnodes 2 --node_rank 1 --nproc_per_node 1 --rdzv_backend c10d \\
        --rdzv_endpoint 127.0.0.1:29400 --rdzv_id demo examples/distributed/ddp_train.py

With LOCALNEURON_REPORT_DIR=<dir>, each rank leaves <dir>/localneuron-report-rank<RANK>.json with the
collectives it issued, the bytes they moved and the time they took.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--backend", default="neuron")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    dist.init_process_group(args.backend)  # before touching the device: the backend picks this rank's core
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    device = torch.device(args.device, local_rank) if args.device != "cpu" else torch.device("cpu")

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(args.steps):
        g = torch.Generator().manual_seed(100 * step + rank)  # each rank its own shard of the data
        x, y = torch.randn(16, 32, generator=g).to(device), torch.randn(16, 32, generator=g).to(device)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"rank {rank} step {step} loss {loss.item():.6f} device {x.device}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
