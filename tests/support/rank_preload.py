"""What the rank server (distributed_launcher.py) imports once, before it forks any rank: torch, without the device
backends torch's import would load (each rank loads them after it has taken its own environment, so a rank meets
the device as a fresh interpreter would)."""
import os

os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

import torch  # noqa: E402,F401
