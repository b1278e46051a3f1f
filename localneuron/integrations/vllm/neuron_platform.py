"""vLLM's `Platform` for the `neuron` device.

It extends vLLM's CPU platform: vLLM's CPU build supplies the host-side pieces (scheduler settings,
process layout, its compiled CPU kernels), while this class names the device, its HBM and the worker
that places the model and the KV cache on it. The enum is `OOT`, so vLLM's CustomOps take their
out-of-tree path (their torch-native forward), which runs on the device through its eager executor.
"""
import torch
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import PlatformEnum

WORKER = "localneuron.integrations.vllm.worker.NeuronWorker"
ATTENTION_BACKEND = "localneuron.integrations.vllm.attention.NeuronAttentionBackend"


class NeuronPlatform(CpuPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "neuron"
    device_type: str = "neuron"
    dispatch_key: str = "PrivateUse1"
    # One NeuronCore per engine: no collectives run; Gloo serves vLLM's host-side process groups.
    dist_backend: str = "gloo"
    device_control_env_var: str = "NEURON_RT_VISIBLE_CORES"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float32]

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.neuron.get_device_properties(device_id).name

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.neuron.get_device_properties(device_id).total_memory

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(torch.neuron.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.neuron.set_device(device)

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError(
                "localneuron's vLLM platform serves models with standard (multi/grouped-query) attention; "
                "MLA and sparse attention are not supported on `neuron`. Set LOCALNEURON_VLLM_PLATFORM=0 "
                "to serve this model with vLLM's CPU platform.")
        return ATTENTION_BACKEND

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode, CUDAGraphMode  # vllm.config imports the platform: import late

        parallel = vllm_config.parallel_config
        if parallel.world_size > 1:
            raise ValueError(
                f"localneuron's vLLM platform runs one engine on one NeuronCore; this configuration asks for "
                f"{parallel.world_size} ranks (tensor/pipeline parallel). Serve with "
                f"--tensor-parallel-size 1 --pipeline-parallel-size 1.")
        # The CPU platform's settings are the host side's (processes, threads, block size, preloads); they
        # assert a CPU device, so they see one while they run.
        compile_model = vllm_config.compilation_config.mode != CompilationMode.NONE  # not --enforce-eager
        device = vllm_config.device_config
        device.device_type = "cpu"
        try:
            super().check_and_update_config(vllm_config)
        finally:
            device.device_type = cls.device_type
        parallel.worker_cls = WORKER
        # vLLM's CPU default, Inductor compiling for the host, would bypass the device: the model runner
        # compiles the model with backend `neuron` instead (compiled_model.py), or runs it eagerly.
        compilation = vllm_config.compilation_config
        compilation.mode = CompilationMode.STOCK_TORCH_COMPILE if compile_model else CompilationMode.NONE
        compilation.backend = "neuron"
        compilation.cudagraph_mode = CUDAGraphMode.NONE
