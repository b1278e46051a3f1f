"""`localneuron estimate` run from its parsed options: checks the combination of options, prices the model
(run.py) and prints the summary (summary.py), writing the JSON if asked. Bad input (a missing or broken
file, a layout the instances cannot hold, sizes beyond any run) ends with exit status 2 and a message saying
what to change. cli/estimate.py parses the arguments into EstimateOptions and calls run()."""
import json
import signal
import sys
from dataclasses import dataclass, field, fields

from localneuron.costmodel import stacks
from localneuron.estimate.plan import Request
from localneuron.runtime.checked_files import OutputError, OutputFile

EXIT_BAD_INPUT = 2
# what a request's sizes default to: the request's own defaults, written once there
_REQUEST = {f.name: f.default for f in fields(Request)}


@dataclass(frozen=True)
class EstimateOptions:
    """The options of `localneuron estimate` (cli/estimate.py documents each); the defaults are its defaults (the
    parser leaves an option not given out, so these apply)."""
    hf_config: str | None = None
    model_fn: str | None = None
    script: str | None = None
    script_args: list = field(default_factory=list)
    world_size: int | None = None
    as_written: bool = False
    target: str = "trn2"
    lnc: int | None = None
    stack: str | None = None     # None: stacks.DEFAULT
    nodes: int = 1
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    zero1: bool = _REQUEST["zero1"]
    dtype: str = _REQUEST["dtype"]
    weights: str | None = _REQUEST["weights"]
    mode: str | None = None
    micro_batch: int = _REQUEST["micro_batch"]
    global_batch: int | None = _REQUEST["global_batch"]
    seq: int = _REQUEST["seq"]
    batch: int = _REQUEST["batch"]
    compiled_batch: int | None = _REQUEST["compiled_batch"]
    compiled_seq: int | None = _REQUEST["compiled_seq"]
    input_len: int = _REQUEST["input_len"]
    output_len: int = _REQUEST["output_len"]
    recompute: str | None = None
    json: str | None = None


def _request(args: EstimateOptions) -> Request:
    recompute = args.recompute or ("none" if args.as_written else "selective")
    if args.as_written and recompute == "selective":
        raise ValueError("--recompute selective recomputes the attention core, which the recipe's builder does; "
                         "a model as written recomputes whole layers (--recompute full) or nothing (none)")
    return Request(mode=args.mode, dtype=args.dtype, micro_batch=args.micro_batch, global_batch=args.global_batch,
                        seq=args.seq, batch=args.batch, input_len=args.input_len, output_len=args.output_len,
                        zero1=args.zero1, recompute=recompute, weights=args.weights, compiled_batch=args.compiled_batch,
                        compiled_seq=args.compiled_seq)


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


def run(args: EstimateOptions) -> int:
    """The whole of `localneuron estimate`; returns its exit status (EXIT_BAD_INPUT: the input is wrong)."""
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
        target = target_chip(args.target, args.lnc, args.stack or stacks.DEFAULT)
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
            if (args.model_fn or args.as_written) and args.compiled_seq is not None:
                raise ValueError("--compiled-seq goes with --hf-config's tuned recipe (no --as-written): the recipe "
                                 "pads the prompt to the compiled length where the --stack compiles for one length")
            if args.model_fn and args.compiled_batch is not None:
                raise ValueError("--compiled-batch goes with --hf-config: a --model-fn model decodes at the batch of "
                                 "its example inputs; return inputs of the compiled batch to price that")
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


def _script(args: EstimateOptions, target) -> dict:
    from localneuron.estimate import run as estimate_run
    from localneuron.estimate.layout import check_nodes

    if args.mode not in (None, "train"):
        raise ValueError("--script prices a training script's step: --mode train (or no --mode)")
    for name, default in {"tp": 1, "pp": 1, "dp": None, "micro_batch": 1, "global_batch": None, "seq": 2048,
                          "compiled_batch": None, "compiled_seq": None}.items():
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
    return estimate_run.estimate_script(args.script, args.script_args, target, world, args.nodes)
