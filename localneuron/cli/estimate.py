"""`localneuron estimate`'s arguments: how fast a model would train or serve on Trainium and whether it
fits in HBM, computed from a Hugging Face config.json, a model factory or the user's own training script,
without allocating the model. Only the parser is here; localneuron/estimate/command.py runs the estimate. An option
not given is left out of the parsed arguments, so EstimateOptions' defaults (a request's: estimate/plan.py Request)
are the only ones; the help texts quote them."""
import argparse

from localneuron.estimate import command

DEFAULT = command.EstimateOptions()


def add_parser(commands):
    """Adds `estimate` to the subcommands; returns its parser (main.py sets its handler)."""
    p = commands.add_parser(
        "estimate", argument_default=argparse.SUPPRESS,
        help="estimate step time / TTFT / TPOT and HBM per core on trn1/trn2/trn3, without running",
        description="Prices the model with the cost model, traced on fake neuron tensors (an estimate, not a "
                    "measurement; every answer says how far published results let you trust it, "
                    "docs/calibration.md shows them).")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--hf-config", metavar="CONFIG.json",
                       help="a Hugging Face config.json (no weights, no network). By default the model is priced as "
                            "a tuned TorchNeuron recipe runs it (the recipe is printed); --as-written prices the model "
                            "transformers builds, as its own code runs")
    model.add_argument("--model-fn", metavar="module:function",
                       help="a factory returning (model, example inputs), made without a device. Tensor parallelism "
                            "(--tp) needs the model to declare tp_plan = {module-name pattern: 'colwise'|'rowwise'} "
                            "(transformers' convention; '*' matches one name part): those nn.Linear layers are cut "
                            "to 1/tp of their output (colwise) or input (rowwise) features, so the model's code must "
                            "take head counts from shapes (view(..., -1, head_dim)); a row-parallel output is "
                            "all-reduced, a column-parallel input's gradient too. --pp splits the step evenly "
                            "over the stages of the model's largest nn.ModuleList. --mode decode needs a "
                            "transformers-style forward(input_ids, past_key_values=..., use_cache=True)")
    model.add_argument("--script", metavar="SCRIPT",
                       help="your own training script, with its arguments after it (SCRIPT [ARGS...]; put `--` before "
                            "an argument the script shares a name with estimate's own options): run without the "
                            "hardware as rank r of --world-size simulated ranks, one run per distinct role (pipeline "
                            "stage), on fake neuron tensors; its second optimizer step is priced")
    p.add_argument("--world-size", type=int, help="--script: ranks of the simulated job (default: every NeuronCore "
                                                  "of --nodes instances)")
    p.add_argument("--as-written", action="store_true",
                   help="with --hf-config: price the model transformers builds from the config exactly as its code "
                        "runs (its attention path, no recompute unless --recompute full), instead of the tuned recipe "
                        "(needs the hf extra); the fits verdict is compared with the recipe's")
    p.add_argument("--target", help=f"trn1, trn2 or trn3 (default {DEFAULT.target})")
    p.add_argument("--lnc", type=int, choices=(1, 2),
                   help="physical NeuronCores per logical core (trn2/trn3: 2 by default, as TorchNeuron runs them; "
                        "1 where the hardware allows; trn1: 1)")
    p.add_argument("--stack", help="the software stack priced, each a few efficiencies fitted on the published rows "
                                   "that ran it: torchneuron (the default: a tuned TorchNeuron recipe), "
                                   "transformers-neuronx, optimum-neuron, megatron-lm-reference, hf-torch-neuronx "
                                   "(docs/estimate.md says what each stands for)")
    p.add_argument("--nodes", type=int, help=f"instances (16 chips each; default {DEFAULT.nodes})")
    p.add_argument("--tp", type=int, help=f"tensor-parallel degree (over logical cores; default {DEFAULT.tp})")
    p.add_argument("--pp", type=int, help=f"pipeline-parallel degree (1F1B schedule; default {DEFAULT.pp})")
    p.add_argument("--dp", type=int, help="data-parallel degree (default: every remaining core)")
    p.add_argument("--zero1", action="store_true", help="shard the optimizer state over the data-parallel ranks")
    p.add_argument("--dtype", choices=("bf16", "fp32"), help=f"default {DEFAULT.dtype}")
    p.add_argument("--weights", choices=("int8", "fp8"),
                   help="inference: weights stored quantized (weight-only): int8 widened to --dtype on VectorE before "
                        "TensorE reads it, fp8 read by TensorE as stored")
    p.add_argument("--mode", choices=("train", "prefill", "decode"), help="required except with --script (training)")
    p.add_argument("--micro-batch", type=int, help=f"sequences per micro-batch (default {DEFAULT.micro_batch})")
    p.add_argument("--global-batch", type=int, help="sequences per optimizer step (default micro-batch x dp)")
    p.add_argument("--seq", type=int, help=f"training sequence length (default {DEFAULT.seq})")
    p.add_argument("--batch", type=int,
                   help=f"inference batch: the sequences a request brings (default {DEFAULT.batch})")
    p.add_argument("--compiled-batch", type=int,
                   help="serving: the batch the model was compiled for (default --batch). Every decode step runs "
                        "all its slots and the KV cache holds them; the prompt is prefilled at --batch")
    p.add_argument("--compiled-seq", type=int,
                   help="serving: the sequence length the model's graphs were compiled for. A --stack that compiles "
                        "for that one length (optimum-neuron) encodes every prompt padded to it and attends over "
                        "all of it each decode step; other stacks bucket, and run the request's own lengths")
    p.add_argument("--input-len", type=int, help=f"inference: prompt tokens (default {DEFAULT.input_len})")
    p.add_argument("--output-len", type=int, help=f"inference: generated tokens (default {DEFAULT.output_len})")
    p.add_argument("--recompute", choices=("none", "selective", "full"),
                   help="activation recompute while training: selective (the attention core; the recipe's "
                        "default), full (whole layers), none (the default --as-written)")
    p.add_argument("--json", metavar="OUT.json", help="also write the estimate as JSON")
    p.set_defaults(script_args=[])
    return p


# estimate's own options that may follow a --script's arguments, and whether each takes a value
OWN_AFTER_SCRIPT = {"--world-size": True, "--target": True, "--nodes": True, "--lnc": True, "--json": True,
                    "--mode": True, "--stack": True}


def split_script_arguments(argv: list) -> tuple[list, list]:
    """(estimate's arguments, the script's arguments): after `--script SCRIPT`, every argument goes to
    the script except estimate's own options above (with their values); everything after `--` does."""
    if "--script" not in argv:
        return argv, []
    at = argv.index("--script") + 2
    ours, theirs = list(argv[:at]), []
    rest = iter(argv[at:])
    for token in rest:
        if token == "--":
            theirs += list(rest)
            break
        name = token.split("=", 1)[0]
        if name in OWN_AFTER_SCRIPT:
            ours.append(token)
            if OWN_AFTER_SCRIPT[name] and "=" not in token:
                ours.append(next(rest, ""))
        else:
            theirs.append(token)
    return ours, theirs
