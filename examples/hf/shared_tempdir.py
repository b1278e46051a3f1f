"""The examples' default output directory: one temporary directory that every rank of a run shares
(checkpoints and training state are written by some ranks and read by all) and that is removed when the
run ends. Rank 0 creates it and tells the other ranks its name, so the default serves one machine; for
several machines pass the examples a directory on a shared file system instead."""
import contextlib
import shutil
import tempfile

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list


@contextlib.contextmanager
def shared_temporary_directory(prefix: str, cpu: bool = False):
    """`cpu` selects the CPU (Gloo) process group when this is the first use of Accelerate in the process."""
    state = PartialState(cpu=cpu)  # joins the launcher's process group, as the Trainer or Accelerator would
    name = [tempfile.mkdtemp(prefix=prefix) if state.is_main_process else None]
    broadcast_object_list(name)
    try:
        yield name[0]
    finally:
        # No rank may still be reading when rank 0 removes the directory. Not Accelerate's wait_for_everyone:
        # it names the accelerator's device to the barrier, which a CPU (Gloo) group cannot serve.
        if torch.distributed.is_initialized():
            torch.distributed.barrier()
        if state.is_main_process:
            shutil.rmtree(name[0], ignore_errors=True)
