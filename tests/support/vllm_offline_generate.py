"""Runs vLLM's offline `LLM.generate` (greedy) in its own process and prints the new token ids as JSON,
with the platform vLLM chose and where the model's weights and KV cache live.

vLLM spawns its engine process, so this must run as a script (`__main__` guard), not inside pytest.
Usage: python tests/support/vllm_offline_generate.py [--enforce-eager] MODEL_DIR MAX_NEW_TOKENS PROMPT [PROMPT ...]
The result is the line starting with RESULT_PREFIX (vLLM logs to stdout too).
"""
import json
import os
import sys

RESULT_PREFIX = "VLLM_OFFLINE_RESULT "
# the engine's worker writes the portability report while it shuts down: give it time on a busy machine
SHUTDOWN_TIMEOUT_S = 300


def main(directory: str, max_new_tokens: int, prompts: list[str], enforce_eager: bool) -> None:
    os.environ.setdefault("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", str(SHUTDOWN_TIMEOUT_S))
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    # at most 256 tokens a step (the model length): a compiled engine builds 9 bucket graphs (1..256), not 12 (1..2048)
    llm = LLM(model=directory, dtype="float32", max_model_len=256, max_num_batched_tokens=256, max_num_seqs=8, seed=0,
              kv_cache_memory_bytes=64 << 20, enforce_eager=enforce_eager)
    params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, ignore_eos=True)
    results = llm.generate(prompts, params, use_tqdm=False)
    print(RESULT_PREFIX + json.dumps({"platform": type(current_platform).__name__,
                                      "tokens": [list(r.outputs[0].token_ids) for r in results]}), flush=True)
    llm.llm_engine.engine_core.shutdown(timeout=SHUTDOWN_TIMEOUT_S)


if __name__ == "__main__":
    eager = sys.argv[1:2] == ["--enforce-eager"]
    args = sys.argv[2:] if eager else sys.argv[1:]
    main(args[0], int(args[1]), args[2:], eager)
