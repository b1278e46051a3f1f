"""vLLM's worker for one NeuronCore: the device, the model runner, and the KV-cache budget from HBM."""
from contextlib import nullcontext

import psutil
import torch
from vllm.platforms import current_platform
from vllm.utils.mem_utils import format_gib
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment

from localneuron.integrations.vllm import profiling, report, stats
from localneuron.integrations.vllm.model_runner import NeuronModelRunner


class NeuronWorker(CPUWorker):
    def __init__(self, vllm_config, local_rank: int, rank: int, distributed_init_method: str,
                 is_driver_worker: bool = False):
        profiling.register()
        report.open_output()  # LOCALNEURON_VLLM_REPORT is checked before the engine starts, not at shutdown
        # CPUWorker's own __init__ budgets host RAM for the KV cache; the budget here is the core's HBM.
        Worker.__init__(self, vllm_config, local_rank, rank, distributed_init_method,
                        is_driver_worker=is_driver_worker)
        self.parallel_config.disable_custom_all_reduce = True

    def init_device(self):
        # vLLM's input preparation and sampling stay on the host; the model and the KV cache go to HBM.
        self.device = torch.device("cpu")
        self.neuron_device = torch.device("neuron", self.local_rank)
        torch.neuron.set_device(self.neuron_device)
        init_worker_distributed_environment(self.vllm_config, self.rank, self.distributed_init_method,
                                            self.local_rank, current_platform.dist_backend)
        set_random_seed(self.model_config.seed)
        self.model_runner = NeuronModelRunner(self.vllm_config, self.device, self.neuron_device)

    def _maybe_get_memory_pool_context(self, tag: str):
        return nullcontext()  # vLLM's sleep-mode memory pools are CUDA's; neuron has none

    def determine_available_memory(self) -> int:
        """Bytes of HBM for the KV cache: the requested share of the core's HBM minus what the weights and
        the largest forward pass (vLLM's profile run) occupy."""
        device = self.neuron_device
        capacity = torch.neuron.get_device_properties(device).total_memory
        torch.neuron.reset_peak_memory_stats(device)
        self.model_runner.profile_run()
        peak = torch.neuron.max_memory_allocated(device)
        explicit = self.cache_config.kv_cache_memory_bytes
        budget = explicit if explicit is not None else int(capacity * self.cache_config.gpu_memory_utilization) - peak
        if budget <= 0 or peak + budget > capacity:
            raise ValueError(
                f"The KV cache does not fit in {device}'s HBM: {format_gib(capacity)} GiB, of which the model and "
                f"its largest forward pass use {format_gib(peak)} GiB, and {format_gib(max(budget, 0))} GiB were "
                f"asked for the KV cache. Lower --kv-cache-memory-bytes, raise --gpu-memory-utilization, or "
                f"simulate more HBM with LOCALNEURON_HBM_BYTES_PER_CORE.")
        host_free = psutil.virtual_memory().available
        if budget > host_free:
            raise ValueError(
                f"The simulated HBM lives in host RAM: a {format_gib(budget)} GiB KV cache does not fit in the "
                f"{format_gib(host_free)} GiB of RAM available. Pass --kv-cache-memory-bytes or "
                f"--gpu-memory-utilization, or simulate less HBM with LOCALNEURON_HBM_BYTES_PER_CORE.")
        stats.hbm.update(capacity_bytes=capacity, forward_peak_bytes=peak)
        return budget

    def compile_or_warm_up_model(self):
        self.model_runner.compile_buckets()
        return super().compile_or_warm_up_model()

    def shutdown(self) -> None:
        # first: vLLM kills a worker that is still tearing down after --shutdown-timeout (at least 5 s)
        report.write_at_shutdown()
        super().shutdown()
