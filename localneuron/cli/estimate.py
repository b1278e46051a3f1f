"""`localneuron estimate`: how fast a model would train or serve on Trainium and whether it fits in
HBM, computed from a Hugging Face config.json, a model factory or the user's own training script,
without allocating the model. Bad input (a missing or broken file, a layout the instances cannot hold,
sizes beyond any run) ends with exit status 2 and a message saying what to change."""
import dataclasses
import sys

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
    p.add_argument("--mode", required=True, choices=("train", "prefill", "decode"))
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
    p.set_defaults(handler=run)


def _target(args):
    from localneuron.costmodel.hardware import chip

    target = chip(args.target)
    if args.lnc is None or args.lnc == target.lnc:
        return target
    if target.physical_cores == 1 or target.physical_cores % args.lnc:
        raise ValueError(f"--lnc {args.lnc}: {target.name} has {target.physical_cores} NeuronCores per chip at LNC="
                         f"{target.lnc} only")
    if target.name == "trn1":
        raise ValueError("--lnc 2: trn1 runs one physical NeuronCore per logical core (LNC=1) only")
    return dataclasses.replace(target, lnc=args.lnc)


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
    from localneuron.estimate.layout import Layout

    try:
        if args.as_written and not args.hf_config:
            raise ValueError("--as-written goes with --hf-config (a --model-fn model is always priced as written)")
        if args.as_written and not hf.available():
            raise ImportError("--as-written builds the model with transformers: pip install 'localneuron[hf]'")
        target = _target(args)
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
    except (OverflowError, MemoryError) as error:
        print(f"localneuron estimate: the sizes requested overflow what the estimate can represent ({error}); "
              f"give the sizes of the run you want estimated", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(summary.render(result))
    if args.json:
        from localneuron.cli.main import _write_json

        _write_json(result, args.json)
    return 0

