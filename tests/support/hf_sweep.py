"""Hugging Face architecture sweep: every model type in Transformers' auto mappings for causal LMs and base
models, built offline from its config class with generically shrunk sizes and random weights, run on the
CPU and on `neuron` and compared.

Per architecture (model type): the causal-LM class when the type has one, else the base model class.
Stages, in order: build (config + model on the CPU), cpu (forward + backward on the CPU), to_device,
forward (outputs compared with the CPU's), backward (every parameter's gradient compared), generate (greedy
tokens compared; causal LMs only). Status:
  pass          every stage matched the CPU
  fail          a stage raised on `neuron` or differed from the CPU (the stage and reason are recorded)
  crash/timeout the worker died or exceeded the per-architecture limit on it (re-run alone to confirm)
  cpu-fails     the shrunk model does not build or run on the CPU: not in the denominator
CPU fallbacks used on `neuron` (torch_neuronx.get_fallback_ops()) are recorded for every architecture.
Random samples a model draws in forward are recorded in the CPU run and replayed in the `neuron` run
(tests/support/random_replay.py says why); the sampling ops still run on the device.

Crash isolation: workers take model types from stdin one at a time and announce each before running it;
a dead or stuck worker is replaced and the architecture it was on is recorded as crash / timeout.

Usage: python tests/support/hf_sweep.py [--types llama,gpt2] [--workers N] [--json out.json] [--markdown docs/hf-coverage.md]
                                [--write-expected] [--from-json chunk1.json chunk2.json ...]
The expected status per architecture (tests/support/expected/hf_sweep_status.py, format: tests/support/expected_status.py)
is what tests/sweeps/test_hf_sweep.py checks each architecture against, so a regression fails under its name.
"""
import argparse
import contextlib
import gc
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter

EXPECTED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected", "hf_sweep_status.py")
# The limit per architecture is on the worker's CPU time, so that a host shared with other work (fewer CPU
# seconds per wall second) does not turn slow-but-progressing architectures into timeouts; a worker that
# stays silent for WALL_LIMIT_FACTOR times the limit in wall time is stuck (blocked, not computing).
ARCH_TIMEOUT_S = float(os.environ.get("HF_SWEEP_ARCH_TIMEOUT", "180"))
WALL_LIMIT_FACTOR = 6
# Address space per worker: a shrink rung that still builds default-size sub-models (tens of GB) then fails
# with an allocation error, recorded like any failure, instead of the kernel's OOM killer ending the worker
# (or another process on the host)
WORKER_MEMORY_GIB = float(os.environ.get("HF_SWEEP_WORKER_MEMORY_GIB", "8"))
WORKER_START_TIMEOUT_S = 180.0
EXIT_WAIT_S = 5.0
BATCH, LENGTH, NEW_TOKENS = 2, 8, 3
FORWARD_SEED = 5
FORWARD_TOLERANCE = dict(atol=1e-4, rtol=1e-3)
GRADIENT_TOLERANCE = dict(atol=1e-3, rtol=1e-2)

# Size fields and the value they shrink to (a field is only set when the config already has it).
SHRUNK_SIZES = {
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "n_embed": 32, "embed_dim": 32, "dim": 32, "model_dim": 32,
    "word_embed_proj_dim": 32, "projection_dim": 32, "embedding_size": 32, "text_embed_dim": 32,
    "intermediate_size": 64, "ffn_dim": 64, "n_inner": 64, "d_ff": 64, "hidden_dim": 64, "inner_hidden_size": 64,
    "decoder_ffn_dim": 64, "encoder_ffn_dim": 64, "ffn_hidden_size": 64, "shared_expert_intermediate_size": 64,
    "moe_intermediate_size": 32, "expert_intermediate_size": 32,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2, "decoder_layers": 2,
    "encoder_layers": 2, "num_decoder_layers": 2, "num_encoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "decoder_attention_heads": 4,
    "encoder_attention_heads": 4, "index_n_heads": 4,
    "vocab_size": 128, "max_position_embeddings": 128, "n_positions": 128, "n_ctx": 128, "seq_length": 128,
    "max_seq_len": 128, "max_sequence_length": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "n_shared_experts": 1, "num_shared_experts": 1,
    "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1,
    "sliding_window": 16, "attention_window": 16, "local_attention": 16, "chunk_size_feed_forward": 0,
    "image_size": 32, "patch_size": 8, "num_channels": 3, "max_source_positions": 64,
    "num_mel_bins": 16, "conv_dim": [16, 16], "conv_kernel": [3, 3], "conv_stride": [2, 2],
    "num_codebooks": 2, "codebook_size": 32,
    "num_filters": 4,  # audio tokenizers double it per down-sampling stage (VibeVoice: 6 stages)
    "encoder_hash_byte_group_vocab": 128,  # BLT's hashed n-gram embeddings (500,002 rows each by default)
}
# Per-head sizes keep their ratio to the per-head width (hidden size / query heads), which shrinks to
# SHRUNK_HEAD_WIDTH: a size equal to the width stays equal to it, one that differs keeps differing (Gemma's
# 256-wide heads at a width of 192), and among themselves equal sizes stay equal and sums stay sums: multi-head
# latent attention keeps its query/key heads (nope + rope) wider than its value heads (DeepSeek-V3: 192 and
# 128) and its ranks in proportion. Sizes are multiples of HEAD_SIZE_MULTIPLE (rotary embeddings rotate pairs
# and partial rotary factors take halves).
HEAD_SIZE_FIELDS = ("head_dim", "kv_channels", "d_kv", "qk_nope_head_dim", "qk_rope_head_dim", "qk_head_dim",
                    "v_head_dim", "kv_lora_rank", "q_lora_rank", "o_lora_rank", "index_head_dim", "linear_head_dim")
HIDDEN_SIZE_FIELDS = ("hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "dim", "model_dim")
SHRUNK_HEAD_WIDTH = 8
HEAD_SIZE_MULTIPLE = 4
# Key/value head counts keep their relation to the query heads (equal: multi-head, 1: multi-query, else 2).
KV_HEAD_FIELDS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
QUERY_HEAD_FIELDS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
# Layer counts tried in turn: hybrid models (attention every k-th layer) need more than two to contain
# every layer kind; the larger count is tried only when the smaller one does not run on the CPU.
LAYER_LADDER = (2, 8)
# Sub-configurations shrunk: all of them first; when that model does not run on the CPU (a codec whose
# grouped convolutions need its own channel counts, a projector sized for a default encoder), the main
# modalities only, the rest keeping their defaults.
MAIN_SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "encoder_config", "decoder_config",
                    "speech_config", "qformer_config", "backbone_config")
SHRINK_LADDER = [(layers, every_sub_config) for every_sub_config in (True, False) for layers in LAYER_LADDER]
LAYER_FIELDS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers", "encoder_layers",
                "num_decoder_layers", "num_encoder_layers")
# Token-id fields: moved inside the shrunk vocabulary when they fall outside it.
TOKEN_ID_FIELDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
                   "cls_token_id", "mask_token_id", "unk_token_id", "image_token_id", "image_token_index",
                   "video_token_id", "audio_token_id", "boi_token_id", "eoi_token_id")


# Failures with a known cause (a substring of the reason or of the fallbacks -> the explanation); each is a
# documented TorchNeuron behaviour or a localneuron gap owned by other work.
KNOWN_CAUSES = {
    "exceeded": "slower than the sweep's per-architecture limit of CPU time on a shared 2-core host",
}


def known_cause(record: dict) -> str | None:
    text = (record["reason"] or "") + " " + " ".join(record["fallbacks"])
    return next((cause for key, cause in KNOWN_CAUSES.items() if key in text), None)


# sweep status -> the status expected_status.check compares (crash and timeout are failures there)
CHECKED_STATUS = {"pass": "pass", "fail": "fail", "crash": "fail", "timeout": "fail", "cpu-fails": "skip"}


def expected_line(record: dict) -> str:
    """The checked-in expectation for one architecture's record (tests/support/expected_status.py format)."""
    where = f"{record['stage']}: {record['reason']}"
    if record["status"] == "pass":
        return "pass"
    if record["status"] == "cpu-fails":
        return f"skip: the shrunk model does not run on the CPU ({where})"
    return f"xfail: {known_cause(record) or 'unclassified'} ({record['status']} at {where})"


# --------------------------------------------------------------------------------------------- catalogue
def architectures() -> dict[str, str]:
    """model type -> the model class the sweep runs (causal LM when there is one, else the base model)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    chosen = {}
    for mapping in (MODEL_MAPPING_NAMES, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):  # causal LM wins
        for model_type, names in mapping.items():
            chosen[model_type] = names[0] if isinstance(names, (tuple, list)) else names
    return dict(sorted(chosen.items()))


# --------------------------------------------------------------------------------------------- worker side
def _read(config, field, default=None):
    """A config field's global value; a heterogeneous config (per-layer overrides) refuses plain reads of the
    fields its layers override."""
    try:
        return getattr(config, field, default)
    except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError
        return config._getattr_without_heterogeneous_validation(field, default)


def _first_int(config, fields):
    return next((v for f in fields if isinstance(v := _read(config, f), int) and not isinstance(v, bool)), None)


def shrunk_head_sizes(sizes: dict, width: float | None) -> dict:
    """{field: size} of HEAD_SIZE_FIELDS, shrunk keeping their ratios to `width` (the per-head width, None when
    the config has none) and among themselves."""
    if not sizes:
        return {}
    width = width or max(sizes.values())
    scale = SHRUNK_HEAD_WIDTH / width
    shrunk = {f: max(HEAD_SIZE_MULTIPLE, HEAD_SIZE_MULTIPLE * round(v * scale / HEAD_SIZE_MULTIPLE))
              for f, v in sizes.items()}
    for f, v in sizes.items():  # rounded onto the shrunk width although it differed from the width
        if v != width and shrunk[f] == SHRUNK_HEAD_WIDTH:
            for same in [g for g, w in sizes.items() if w == v]:
                shrunk[same] = SHRUNK_HEAD_WIDTH + HEAD_SIZE_MULTIPLE
    parts = ("qk_nope_head_dim", "qk_rope_head_dim")
    if "qk_head_dim" in sizes and all(p in sizes for p in parts) and sizes["qk_head_dim"] == sum(sizes[p] for p in parts):
        shrunk["qk_head_dim"] = sum(shrunk[p] for p in parts)
    return shrunk


def _head_sizes(config) -> dict:
    sizes = {f: v for f in HEAD_SIZE_FIELDS if isinstance(v := _read(config, f), int) and not isinstance(v, bool)
             and v > 0}
    hidden, heads = _first_int(config, HIDDEN_SIZE_FIELDS), _first_int(config, QUERY_HEAD_FIELDS)
    return shrunk_head_sizes(sizes, hidden / heads if hidden and heads else None)


def _shrink(config, layers: int, every_sub_config: bool = True, seen=None) -> None:
    seen = seen if seen is not None else set()
    if id(config) in seen:
        return
    seen.add(id(config))
    layers_before = _read(config, "num_hidden_layers")
    query_heads, hidden = _first_int(config, QUERY_HEAD_FIELDS), _first_int(config, HIDDEN_SIZE_FIELDS)
    sizes = {**SHRUNK_SIZES, **{field: layers for field in LAYER_FIELDS}, **_head_sizes(config)}
    for field in KV_HEAD_FIELDS:
        kv_heads = _read(config, field)
        if isinstance(kv_heads, int):
            sizes[field] = 4 if kv_heads == query_heads else 1 if kv_heads == 1 else 2
    for field, value in sizes.items():
        current = _read(config, field, "absent")
        if current == "absent" or (isinstance(current, bool)):
            continue
        if isinstance(value, list) != isinstance(current, list) and current is not None and value is not None:
            continue  # e.g. a per-layer list where the table has a number
        try:
            setattr(config, field, value)
        except Exception:  # noqa: BLE001 - read-only properties keep their value
            pass
    layers = _read(config, "num_hidden_layers")
    if isinstance(layers_before, int) and isinstance(layers, int):
        for field, current in list(vars(config).items()):  # per-layer lists follow the layer count
            if isinstance(current, list) and len(current) == layers_before and layers_before != layers:
                setattr(config, field, current[:layers])
        _shrink_layer_overrides(config, layers, hidden)
    vocab = _read(config, "vocab_size")
    if isinstance(vocab, int):
        for field in TOKEN_ID_FIELDS:
            token = _read(config, field)
            if isinstance(token, int) and token >= vocab:
                setattr(config, field, vocab - 1 - TOKEN_ID_FIELDS.index(field) % 8)
            elif isinstance(token, list):
                setattr(config, field, [t if t < vocab else vocab - 1 for t in token])
    for field, sub in list(vars(config).items()):
        if _is_config(sub) and (every_sub_config or field in MAIN_SUB_CONFIGS):
            _shrink(sub, layers, every_sub_config, seen)


def _shrink_layer_overrides(config, layers: int, hidden: int | None) -> None:
    """A heterogeneous config's per-layer overrides (Dots3's sliding-window layers have their own heads): those of
    layers cut off are dropped, the rest shrunk as the global fields are (`hidden`: the global hidden size before
    shrinking)."""
    spec = getattr(config, "_heterogeneity_spec", None)
    if spec is None:
        return
    overrides = spec.per_layer_overrides
    for index in [i for i in overrides if i >= layers]:
        del overrides[index]
    for values in overrides.values():
        heads = next((values[f] for f in QUERY_HEAD_FIELDS if isinstance(values.get(f), int)), None)
        for field in KV_HEAD_FIELDS:
            if isinstance(values.get(field), int):
                values[field] = 4 if values[field] == heads else 1 if values[field] == 1 else 2
        values.update({f: SHRUNK_SIZES[f] for f in values if f in SHRUNK_SIZES and isinstance(values[f], int)})
        sizes = {f: v for f, v in values.items() if f in HEAD_SIZE_FIELDS and isinstance(v, int) and v > 0}
        values.update(shrunk_head_sizes(sizes, None if heads is None or hidden is None else hidden / heads))
    spec.per_layer_attributes = {a for values in overrides.values() for a in values} - {"skip"}


def _is_config(value) -> bool:
    from transformers import PretrainedConfig

    return isinstance(value, PretrainedConfig)


def _build(model_type: str, class_name: str, layers: int = LAYER_LADDER[0], every_sub_config: bool = True):
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]()
    _shrink(config, layers, every_sub_config)
    torch.manual_seed(0)  # attention as the class runs it by default: SDPA where it supports it (the fused op)
    model = getattr(transformers, class_name)(config)
    return model.eval(), config


def _as_built(cpu_model, model_type: str, class_name: str, layers: int, every_sub_config: bool):
    """The model for the device run as it was built, not as the CPU forward left it (BigBird swaps in new
    attention modules on its first forward, drawing their initial weights): then both runs draw alike.
    Rebuilt with the build's seed rather than copied before the CPU run, which would hold a second copy of
    every model the shrink ladder tries; a build that does not reproduce falls back to a copy."""
    import copy

    import torch

    rebuilt, _ = _build(model_type, class_name, layers, every_sub_config)
    built_state = cpu_model.state_dict()
    if all(name in built_state and torch.equal(tensor, built_state[name])
           for name, tensor in rebuilt.state_dict().items()):
        return rebuilt
    return copy.deepcopy(cpu_model)


GENERATED_INPUTS = ("input_ids", "pixel_values", "input_features", "input_values")


def _inputs(model, config, device):
    import torch

    generator = torch.Generator().manual_seed(1)
    name = getattr(model, "main_input_name", "input_ids")
    vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", 128)
    if name == "input_ids":
        inputs = {"input_ids": torch.randint(3, max(4, min(vocab, 128)), (BATCH, LENGTH), generator=generator)}
    elif name == "pixel_values":
        channels = getattr(config, "num_channels", 3)
        size = getattr(config, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        inputs = {name: torch.randn(BATCH, channels, size, size, generator=generator)}
    elif name == "input_features":
        inputs = {name: torch.randn(BATCH, getattr(config, "num_mel_bins", 16), 2 * getattr(
            config, "max_source_positions", 64), generator=generator)}
    elif name == "input_values":
        inputs = {name: torch.randn(BATCH, 1600, generator=generator)}
    else:
        raise ValueError(f"main input {name!r} is not generated by the sweep")
    if getattr(config, "is_encoder_decoder", False) and "input_ids" in inputs:
        inputs["decoder_input_ids"] = inputs["input_ids"][:, : LENGTH // 2].clone()
    return {key: value.to(device) for key, value in inputs.items()}


def _tensors(output):
    """The floating-point tensors of a model output, flattened in a stable order."""
    import torch

    if isinstance(output, torch.Tensor):
        return [output] if output.is_floating_point() else []
    if hasattr(output, "to_tuple"):
        output = output.to_tuple()
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _tensors(item)]
    return []


def _forward_backward(model, inputs, sampling):
    """Forward (under `sampling`: a random_replay mode) and backward: (outputs, gradients)."""
    import torch

    model.zero_grad(set_to_none=True)
    torch.manual_seed(FORWARD_SEED)  # a run drawing on one device only is also reproducible without the replay
    with sampling:
        outputs = _tensors(model(**inputs))
    if not outputs:
        raise ValueError("the model returned no floating-point tensor")
    loss = sum(t.float().square().mean() for t in outputs if t.requires_grad)
    if not isinstance(loss, torch.Tensor):
        raise ValueError("no output depends on the parameters")
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.requires_grad}
    return [t.detach() for t in outputs], grads


def _mismatch(neuron_tensors, cpu_tensors, tolerance):
    import torch

    for index, (device_tensor, host_tensor) in enumerate(zip(neuron_tensors, cpu_tensors)):
        try:
            torch.testing.assert_close(device_tensor.cpu(), host_tensor, **tolerance)
        except AssertionError as error:
            return f"output {index}: " + " ".join(str(error).split())[:200]
    if len(neuron_tensors) != len(cpu_tensors):
        return f"{len(neuron_tensors)} outputs on neuron, {len(cpu_tensors)} on the CPU"
    return None


def _reason(error: BaseException) -> str:
    return f"{type(error).__name__}: " + " ".join(str(error).split())[:300]


def run_architecture(model_type: str, class_name: str) -> dict:
    import torch
    import torch_neuronx

    import transformers
    from random_replay import RecordDraws, ReplayDraws

    record = {"model_type": model_type, "class": class_name, "status": "pass", "stage": None, "reason": None,
              "fallbacks": []}
    try:  # the class attribute is read through Transformers' backend check (a missing torchaudio raises)
        main_input = getattr(getattr(transformers, class_name), "main_input_name", "input_ids")
    except Exception as error:  # noqa: BLE001
        return {**record, "status": "cpu-fails", "stage": "build", "reason": _reason(error)}
    if main_input not in GENERATED_INPUTS:  # known before building a (possibly large) model
        return {**record, "status": "cpu-fails", "stage": "inputs",
                "reason": f"main input {main_input!r} is not generated by the sweep"}
    for layers, every_sub_config in SHRINK_LADDER:
        stage = "build"
        try:
            model, config = _build(model_type, class_name, layers, every_sub_config)
            stage = "cpu"
            cpu_inputs = _inputs(model, config, "cpu")
            cpu_draws = RecordDraws()
            cpu_outputs, cpu_grads = _forward_backward(model, cpu_inputs, cpu_draws)
            generates = class_name.endswith("ForCausalLM") and hasattr(model, "generate")
            if generates:
                cpu_tokens = model.generate(**cpu_inputs, max_new_tokens=NEW_TOKENS, do_sample=False,
                                            min_new_tokens=NEW_TOKENS)
            break
        except Exception as error:  # noqa: BLE001 - every failure is data for the table
            if (layers, every_sub_config) == SHRINK_LADDER[-1]:
                return {**record, "status": "cpu-fails", "stage": stage, "reason": _reason(error)}
            # the next rung may build default-size sub-models (gigabytes): free this one first
            model = config = None
            gc.collect()
    record["layers"], record["every_sub_config_shrunk"] = layers, every_sub_config
    torch_neuronx.clear_op_tracking()
    try:
        stage = "to_device"
        device_model = _as_built(model, model_type, class_name, layers, every_sub_config).to("neuron")
        device_inputs = _inputs(model, config, "neuron")
        stage = "forward"
        # Models that sample in forward (ViT-MAE's masking, VITS's noise) get the CPU run's samples on neuron:
        # see random_replay.py for why seeding both devices alike is not enough to give them the same ones.
        sampling = ReplayDraws(cpu_draws.draws) if cpu_draws.draws else contextlib.nullcontext()
        record["replayed_draws"] = len(cpu_draws.draws)
        device_outputs, device_grads = _forward_backward(device_model, device_inputs, sampling)
        problem = _mismatch(device_outputs, cpu_outputs, FORWARD_TOLERANCE)
        if problem is None:
            stage = "backward"
            names = sorted(cpu_grads)
            if [n for n in names if (cpu_grads[n] is None) != (device_grads[n] is None)]:
                problem = "gradients missing on one side: " + ", ".join(
                    n for n in names if (cpu_grads[n] is None) != (device_grads[n] is None))[:200]
            else:
                present = [n for n in names if cpu_grads[n] is not None]
                problem = _mismatch([device_grads[n] for n in present], [cpu_grads[n] for n in present],
                                    GRADIENT_TOLERANCE)
                if problem is not None:
                    index = int(problem.split(":")[0].split()[1])
                    problem = f"gradient of {present[index]}: " + problem.split(":", 1)[1]
        if problem is None and generates:
            stage = "generate"
            tokens = device_model.generate(**device_inputs, max_new_tokens=NEW_TOKENS, do_sample=False,
                                           min_new_tokens=NEW_TOKENS)
            if tokens.cpu().tolist() != cpu_tokens.tolist():
                problem = f"greedy tokens differ: {tokens.cpu().tolist()} vs CPU {cpu_tokens.tolist()}"
        if problem is not None:
            record.update(status="fail", stage=stage, reason=problem)
    except Exception as error:  # noqa: BLE001
        record.update(status="fail", stage=stage, reason=_reason(error))
    record["fallbacks"] = sorted(torch_neuronx.get_fallback_ops())
    return record


def worker_main() -> None:
    import resource
    import warnings

    limit = int(WORKER_MEMORY_GIB * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    warnings.simplefilter("ignore")
    os.environ.setdefault("TORCH_NEURONX_LOG_LEVEL", "0")
    import transformers  # noqa: F401  (import cost paid before READY)

    transformers.logging.set_verbosity_error()
    print("READY", flush=True)
    for line in sys.stdin:
        model_type, class_name = line.split()
        print("START " + model_type, flush=True)
        started = time.monotonic()
        record = run_architecture(model_type, class_name)
        record["seconds"] = round(time.monotonic() - started, 2)
        print("RESULT " + json.dumps(record), flush=True)


# --------------------------------------------------------------------------------------------- parent side
class _Worker:
    def __init__(self):
        env = {**os.environ, "TORCH_NEURONX_LOG_LEVEL": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TRANSFORMERS_VERBOSITY": "error"}
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _cpu_seconds(self) -> float:
        import psutil

        try:
            times = psutil.Process(self.process.pid).cpu_times()
        except psutil.Error:  # the worker is gone: the reader thread reports it
            return 0.0
        return times.user + times.system + times.children_user + times.children_system

    def next_line(self, cpu_timeout):
        """The next protocol line, or None when the worker died or used more than cpu_timeout CPU seconds
        (or WALL_LIMIT_FACTOR times that in wall time) without producing one."""
        cpu_start, wall_deadline = self._cpu_seconds(), time.monotonic() + WALL_LIMIT_FACTOR * cpu_timeout
        while True:
            try:
                line = self.lines.get(timeout=1.0)
            except queue.Empty:
                line = ""
            if line is None or line.startswith(("READY", "START ", "RESULT ")):
                return line
            if self._cpu_seconds() - cpu_start > cpu_timeout or time.monotonic() > wall_deadline:
                return None

    def exited(self) -> bool:
        """Whether the worker process ended (its output closes a moment before its exit status is known)."""
        try:
            self.process.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _run_list(items, log) -> list[dict]:
    records, pending = [], list(items)
    while pending:
        worker = _Worker()
        if worker.next_line(WORKER_START_TIMEOUT_S) != "READY":
            worker.stop()
            raise RuntimeError("an hf_sweep worker failed to start (is the hf extra installed?)")
        while pending:
            model_type, class_name = pending[0]
            worker.process.stdin.write(f"{model_type} {class_name}\n")
            worker.process.stdin.flush()
            started = worker.next_line(ARCH_TIMEOUT_S)
            line = worker.next_line(ARCH_TIMEOUT_S) if started == "START " + model_type else None
            pending.pop(0)
            if line is None or not line.startswith("RESULT "):
                died = worker.exited()
                records.append({"model_type": model_type, "class": class_name,
                                "status": "crash" if died else "timeout", "stage": "worker",
                                "reason": f"the worker {'died' if died else f'exceeded {ARCH_TIMEOUT_S:.0f} CPU seconds or {WALL_LIMIT_FACTOR * ARCH_TIMEOUT_S:.0f} s'}"
                                          " on this architecture", "fallbacks": []})
                log(f"{model_type}: {records[-1]['status']}")
                worker.stop()
                break
            records.append(json.loads(line[len("RESULT "):]))
            log(f"{model_type}: {records[-1]['status']} ({records[-1].get('seconds')} s)")
        else:
            worker.process.stdin.close()
            worker.stop()
    return records


def run_sweep(types=None, workers: int = 2, log=lambda message: None) -> dict:
    catalogue = architectures()
    selected = [(t, catalogue[t]) for t in (types or catalogue)]
    started = time.monotonic()
    shares = [selected[i::workers] for i in range(workers)]
    results: list[list[dict]] = [[] for _ in shares]
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, _run_list(shares[i], log)))
               for i in range(len(shares))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = sorted((r for share in results for r in share), key=lambda r: r["model_type"])
    return {"records": records, "seconds": round(time.monotonic() - started, 1), "workers": workers,
            "catalogue_size": len(catalogue)}


def merge(sweeps: list[dict]) -> dict:
    """One sweep from several run in chunks (e.g. `--types` slices run one after another): records joined, a
    type swept twice keeps its later record, seconds summed."""
    if not sweeps:
        raise ValueError("no sweep to merge: pass at least one --from-json file")
    records = {r["model_type"]: r for sweep in sweeps for r in sweep["records"]}
    return {"records": sorted(records.values(), key=lambda r: r["model_type"]),
            "seconds": round(sum(sweep["seconds"] for sweep in sweeps), 1),
            "workers": max(sweep["workers"] for sweep in sweeps),
            "catalogue_size": sweeps[-1]["catalogue_size"]}


def summarize(sweep: dict) -> dict:
    counts = Counter(r["status"] for r in sweep["records"])
    runs_on_cpu = sum(n for status, n in counts.items() if status != "cpu-fails")
    return {"architectures": len(sweep["records"]), "runs_on_cpu": runs_on_cpu, "pass": counts["pass"],
            "pass_pct": round(100.0 * counts["pass"] / runs_on_cpu, 1) if runs_on_cpu else 0.0,
            "counts": dict(counts), "seconds": sweep["seconds"], "workers": sweep["workers"]}


def summary_line(sweep: dict) -> str:
    s = summarize(sweep)
    others = ", ".join(f"{n} {status}" for status, n in sorted(s["counts"].items()) if status != "pass")
    return (f"HF sweep: {s['pass']}/{s['runs_on_cpu']} architectures that run on the CPU pass on neuron "
            f"({s['pass_pct']}%); {s['architectures']} swept ({others}); {s['seconds']} s with "
            f"{s['workers']} workers")


def markdown(sweep: dict) -> str:
    import torch
    import transformers

    lines = ["# Hugging Face architecture coverage on `neuron`", "",
             f"Generated by `python tests/support/hf_sweep.py --markdown docs/hf-coverage.md` (Transformers "
             f"{transformers.__version__}, torch {torch.__version__}). Each model type of Transformers' auto "
             "mappings for causal LMs and base models is built from its config class with shrunk sizes and "
             "random weights, then forward, backward (every gradient) and, for causal LMs, greedy generate "
             "run on `neuron` and are compared with the CPU. Random samples drawn in forward (noise, masking) are "
             "the CPU run's, replayed on `neuron` (each device has its own default generator; see "
             "tests/support/random_replay.py). `cpu-fails`: the generically shrunk model does "
             "not build or run on the CPU (not counted).", "", "**" + summary_line(sweep) + "**", "",
             "| model type | class | status | failing stage | reason | CPU fallbacks used |",
             "|---|---|---|---|---|---|"]
    for r in sweep["records"]:
        reason = (r["reason"] or "").replace("|", "\\|")
        cause = known_cause(r) if r["status"] not in ("pass", "cpu-fails") else None
        if cause:
            reason = f"**{cause}** ({reason})"
        lines.append(f"| {r['model_type']} | {r['class']} | {r['status']} | {r['stage'] or ''} | {reason} | "
                     f"{', '.join(r['fallbacks'])} |")
    return "\n".join(lines) + "\n"


def _load(path: str) -> dict:
    with open(path) as f:
        sweep = json.load(f)
    if not isinstance(sweep, dict) or not isinstance(sweep.get("records"), list) or not all(
            isinstance(r, dict) and isinstance(r.get("model_type"), str) and isinstance(r.get("status"), str)
            for r in sweep["records"]) or not isinstance(sweep.get("seconds"), (int, float)):
        raise SystemExit(f"{path} is not a `hf_sweep.py --json` output; re-run the sweep with --json {path}")
    return sweep


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--types", help="comma-separated model types (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--write-expected", action="store_true",
                        help=f"write the expected status per architecture to {os.path.relpath(EXPECTED_FILE)}")
    parser.add_argument("--from-json", nargs="+", metavar="JSON",
                        help="do not sweep: merge these --json outputs of earlier (chunked) runs")
    args = parser.parse_args()
    if args.worker:
        return worker_main()
    if args.from_json:
        sweep = merge([_load(path) for path in args.from_json])
    else:
        sweep = run_sweep(args.types.split(",") if args.types else None, args.workers,
                          log=lambda message: print(message, file=sys.stderr, flush=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(sweep, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(sweep))
    if args.write_expected:
        import expected_status

        expected_status.write(EXPECTED_FILE, {r["model_type"]: expected_line(r) for r in sweep["records"]},
                              "tests/support/hf_sweep.py", partial=args.types is not None)
    print(summary_line(sweep))


if __name__ == "__main__":
    main()
