"""Lets a distributed benchmark start itself: `python benchmarks/distributed_<name>.py` re-runs the script
under torchrun (2 ranks on loopback); under torchrun, or any launcher that sets RANK, it runs as is."""
import os
import subprocess
import sys


def under_torchrun(script: str, nproc: int = 2) -> bool:
    """True in a rank; otherwise launches `script` on `nproc` ranks, waits, and returns False."""
    if "RANK" in os.environ:
        return True
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
                    script, *sys.argv[1:]], check=True)
    return False
