"""`localneuron estimate`: how fast a model would train or serve on Trainium and whether it fits in
HBM, computed from a Hugging Face config.json, a model factory or the user's own training script,
without allocating the model. Bad input (a missing or broken file, a layout the instances cannot hold,
sizes beyond any run) ends with exit status 2 and a message saying what to change."""
import json
import signal
import sys

from localneuron.runtime.checked_files import OutputError, OutputFile

EXIT_BAD_INPUT = 2


def add_parser(commands) -> None:
    p = commands.add_parser(
        "estimate", help="estimate step time / TTFT / TPOT and HBM per core on trn1/trn2/trn3, without running",
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
    p.add_argument("--target", default="trn2", help="trn1, trn2 or trn3 (default trn2)")
    p.add_argument("--lnc", type=int, choices=(1, 2),
                   help="physical NeuronCores per logical core (trn2/trn3: 2 by default, as TorchNeuron runs them; "
                        "1 where the hardware allows; trn1: 1)")
    p.add_argument("--nodes", type=int, default=1, help="instances (16 chips each; default 1)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (over logical cores)")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (1F1B schedule)")
    p.add_argument("--dp", type=int, help="data-parallel degree (default: every remaining core)")
    p.add_argument("--zero1", action="store_true", help="shard the optimizer state over the data-parallel ranks")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    p.add_argument("--weights", choices=("int8", "fp8"),
                   help="inference: weights stored quantized (weight-only), widened to --dtype to compute")
    p.add_argument("--mode", choices=("train", "prefill", "decode"), help="required except with --script (training)")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--global-batch", type=int, help="sequences per optimizer step (default micro-batch x dp)")
    p.add_argument("--seq", type=int, default=2048, help="training sequence length")
    p.add_argument("--batch", type=int, default=1,
                   help="inference batch (a served model compiled for batch N runs every decode step at N)")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--recompute", choices=("none", "selective", "full"),
                   help="activation recompute while training: selective (the attention core; the recipe's "
                        "default), full (whole layers), none (the default --as-written)")
    p.add_argument("--json", metavar="OUT.json", help="also write the estimate as JSON")
    p.set_defaults(handler=run, script_args=[])


# estimate's own options that may follow a --script's arguments, and whether each takes a value
OWN_AFTER_SCRIPT = {"--world-size": True, "--target": True, "--nodes": True, "--lnc": True, "--json": True,
                    "--mode": True}


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


def _request(args):
    from localneuron.estimate import plan

    recompute = args.recompute or ("none" if args.as_written else "selective")
    if args.as_written and recompute == "selective":
        raise ValueError("--recompute selective recomputes the attention core, which the recipe's builder does; "
                         "a model as written recomputes whole layers (--recompute full) or nothing (none)")
    return plan.Request(mode=args.mode, dtype=args.dtype, micro_batch=args.micro_batch, global_batch=args.global_batch,
                        seq=args.seq, batch=args.batch, input_len=args.input_len, output_len=args.output_len,
                        zero1=args.zero1, recompute=recompute, weights=args.weights)


def _fits_compared(written: dict, recipe: dict) -> str:
    """How the as-written memory plan compares with the recipe's: the same verdict, or the term that
    differs most and why."""
    a, b = written["hbm_per_core_bytes"], recipe["hbm_per_core_bytes"]
    if written["fits"] == recipe["fits"]:
        return f"the tuned recipe {'fits' if recipe['fits'] else 'does not fit'} too"
    from localneuron.runtime.units import bytes_text

    term = max((k for k in a if k != "total"), key=lambda k: abs(a[k] - b[k]))
    why = {"activations": "the model's own attention and recompute keep other activations than the recipe's fused "
                          "attention with selective recompute and sequence parallelism",
           "parameters": "the model as written shards by its own plan, the recipe by Megatron's",
           "gradients": "the model as written shards by its own plan, the recipe by Megatron's",
           "optimizer_state": "the model as written shards by its own plan, the recipe by Megatron's",
           "kv_cache": "the model's own cache layout differs from the recipe's"}[term]
    return (f"the tuned recipe {'fits' if recipe['fits'] else 'does not fit'} ({bytes_text(b['total'])}): "
            f"{term.replace('_', ' ')} differ most, {bytes_text(a[term])} as written against {bytes_text(b[term])} "
            f"in the recipe ({why})")


def run(args) -> int:
    from localneuron.estimate import architecture, hf, run as estimate_run, summary
    from localneuron.estimate.layout import Layout, target_chip
    from localneuron.estimate.script import Interrupted

    try:
        # checked and opened now: a --json path that cannot be written fails before the estimate runs
        output = OutputFile(args.json, "--json") if args.json else None
    except OutputError as error:
        print(f"localneuron estimate: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        target = target_chip(args.target, args.lnc)
        if args.script:
            result = _script(args, target)
        else:
            if args.mode is None:
                raise ValueError("--mode train|prefill|decode is required with --hf-config and --model-fn")
            if args.world_size is not None:
                raise ValueError("--world-size goes with --script; for a model, give --nodes and --tp/--pp/--dp")
            if args.as_written and not args.hf_config:
                raise ValueError("--as-written goes with --hf-config (a --model-fn model is always priced as written)")
            if args.as_written and not hf.available():
                raise ImportError("--as-written builds the model with transformers: pip install 'localneuron[hf]'")
            request = _request(args)
            layout = Layout.make(target, args.nodes, args.tp, args.pp, args.dp)
            if args.model_fn:
                result = estimate_run.estimate_factory(args.model_fn, target, layout, request)
            elif args.as_written:
                config = architecture.read(args.hf_config)
                result = estimate_run.estimate_hf(config, target, layout, request)
                try:
                    arch = architecture.from_config(config)
                except architecture.ConfigError:
                    arch = None
                if arch is not None:   # the recipe under the same memory plan (recompute, ZeRO-1)
                    result["fits_compared"] = _fits_compared(result, estimate_run.estimate(arch, target, layout, request))
            else:
                _, arch = architecture.load(args.hf_config)
                result = estimate_run.estimate(arch, target, layout, request)
    except (ValueError, ImportError, NotImplementedError) as error:
        print(f"localneuron estimate: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Interrupted as stop:
        print(f"localneuron estimate: stopped by {signal.Signals(stop.signum).name}: the dry run's worker was killed "
              f"and its temporary files removed", file=sys.stderr)
        return 128 + stop.signum
    except (OverflowError, MemoryError) as error:
        print(f"localneuron estimate: the sizes requested overflow what the estimate can represent ({error}); "
              f"give the sizes of the run you want estimated", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(summary.render(result))
    if output is not None:
        try:
            output.write(json.dumps(result, indent=2, sort_keys=True))
        except OutputError as error:
            print(f"localneuron estimate: {error}", file=sys.stderr)
            return 1
    return 0


def _script(args, target) -> dict:
    from localneuron.estimate import run as estimate_run
    from localneuron.estimate.layout import check_nodes

    if args.mode not in (None, "train"):
        raise ValueError("--script prices a training script's step: --mode train (or no --mode)")
    for name in ("tp", "pp", "dp", "micro_batch", "global_batch", "seq"):
        default = {"tp": 1, "pp": 1, "dp": None, "micro_batch": 1, "global_batch": None, "seq": 2048}[name]
        if getattr(args, name) != default:
            raise ValueError(f"--{name.replace('_', '-')} does not go with --script: the script's own code sets its "
                             f"layout and shapes")
    check_nodes(target, args.nodes)
    if args.world_size is not None and args.world_size < 1:
        raise ValueError(f"--world-size must be a positive integer (ranks of the job), got {args.world_size}")
    world = args.world_size if args.world_size is not None else args.nodes * target.cores_per_instance
    if world > args.nodes * target.cores_per_instance:
        raise ValueError(f"--world-size {world}: {args.nodes} {target.name} instance(s) have "
                         f"{args.nodes * target.cores_per_instance} NeuronCores; give --nodes "
                         f"{-(-world // target.cores_per_instance)} for {world} ranks")
    return estimate_run.estimate_script(args.script, args.script_args, target, world, args.nodes, args.lnc)
