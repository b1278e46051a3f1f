"""`localneuron estimate`: how fast a model would train or serve on Trainium and whether it fits in
HBM, computed from a Hugging Face config.json or a model factory, without allocating the model."""
import json
import sys

from localneuron.runtime.checked_files import OutputError, OutputFile


def add_parser(commands) -> None:
    p = commands.add_parser(
        "estimate", help="estimate step time / TTFT / TPOT and HBM per core on trn1/trn2/trn3, without running",
        description="Traces the model on fake neuron tensors with the device's op routing and prices it with "
                    "the cost model (an estimate, not a measurement; docs/calibration.md shows its error).")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--hf-config", metavar="CONFIG.json", help="a Hugging Face config.json (no weights, no network)")
    model.add_argument("--model-fn", metavar="module:function",
                       help="a factory returning (model, example inputs), made without a device. Tensor parallelism "
                            "(--tp) needs the model to declare tp_plan = {module-name pattern: 'colwise'|'rowwise'} "
                            "(transformers' convention; '*' matches one name part): those nn.Linear layers are cut "
                            "to 1/tp of their output (colwise) or input (rowwise) features, so the model's code must "
                            "take head counts from shapes (view(..., -1, head_dim)); a row-parallel output is "
                            "all-reduced, a column-parallel input's gradient too. --pp splits the step evenly "
                            "over the stages of the model's largest nn.ModuleList. --mode decode needs a "
                            "transformers-style forward(input_ids, past_key_values=..., use_cache=True)")
    p.add_argument("--target", default="trn2", help="trn1, trn2 or trn3 (default trn2)")
    p.add_argument("--nodes", type=int, default=1, help="instances (16 chips each; default 1)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (1F1B schedule)")
    p.add_argument("--dp", type=int, help="data-parallel degree (default: every remaining core)")
    p.add_argument("--zero1", action="store_true", help="shard the optimizer state over the data-parallel ranks")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    p.add_argument("--mode", required=True, choices=("train", "prefill", "decode"))
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--global-batch", type=int, help="sequences per optimizer step (default micro-batch x dp)")
    p.add_argument("--seq", type=int, default=2048, help="training sequence length")
    p.add_argument("--batch", type=int, default=1, help="inference batch size")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--recompute", choices=("none", "selective", "full"),
                   help="activation recompute while training: selective (the attention core; localneuron's "
                        "builder, its default), full (whole layers; the default for transformers models), none")
    p.add_argument("--builder", default="auto", choices=("auto", "transformers", "localneuron"),
                   help="--hf-config: build the model with transformers (AutoModelForCausalLM.from_config; any "
                        "causal LM, the default when it is installed) or with localneuron's Megatron-style "
                        "builder (Llama/GPT families, sequence parallel when --tp > 1)")
    p.add_argument("--json", metavar="OUT.json", help="also write the estimate as JSON")
    p.set_defaults(handler=run)


def _positive(args) -> None:
    for name in ("micro_batch", "seq", "batch", "input_len", "output_len"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.global_batch is not None and args.global_batch < 1:
        raise ValueError(f"--global-batch must be at least 1, got {args.global_batch}")


def _builder(args) -> str:
    from localneuron.estimate import hf

    if not args.hf_config:
        return "factory"
    if args.builder == "transformers" and not hf.available():
        raise ImportError("--builder transformers needs transformers: pip install 'localneuron[hf]'")
    if args.builder == "auto" and not hf.available():
        print("localneuron estimate: transformers is not installed, so the model is built by localneuron's own "
              "Megatron-style builder (Llama and GPT families only); pip install 'localneuron[hf]' to estimate "
              "the model transformers builds from this config", file=sys.stderr)
        return "localneuron"
    return "localneuron" if args.builder == "localneuron" else "transformers"


def run(args) -> int:
    from localneuron.costmodel.hardware import chip
    from localneuron.estimate import architecture, factory, plan
    from localneuron.estimate import run as estimate_run
    from localneuron.estimate.layout import Layout

    try:
        # checked and opened now: a --json path that cannot be written fails before the estimate runs
        output = OutputFile(args.json, "--json") if args.json else None
    except OutputError as error:
        print(f"localneuron estimate: {error}", file=sys.stderr)
        return 2
    try:
        _positive(args)
        target = chip(args.target)
        builder = _builder(args)
        recompute = args.recompute or ("full" if builder == "transformers" else "selective")
        request = plan.Request(mode=args.mode, dtype=args.dtype, micro_batch=args.micro_batch,
                               global_batch=args.global_batch, seq=args.seq, batch=args.batch,
                               input_len=args.input_len, output_len=args.output_len, zero1=args.zero1,
                               recompute=recompute)
        layout = Layout.make(target, args.nodes, args.tp, args.pp, args.dp)
        if builder == "transformers":
            result = estimate_run.estimate_hf(architecture.read(args.hf_config), target, layout, request)
        elif builder == "localneuron":
            _, arch = architecture.load(args.hf_config)
            result = estimate_run.estimate(arch, target, layout, request)
        else:
            result = factory.estimate(args.model_fn, target, layout, request)
    except (ValueError, ImportError, NotImplementedError) as error:
        print(f"localneuron estimate: {error}", file=sys.stderr)
        return 2
    print(estimate_run.summary(result) if args.hf_config else factory.summary(result))
    if output is not None:
        try:
            output.write(json.dumps(result, indent=2, sort_keys=True))
        except OutputError as error:
            print(f"localneuron estimate: {error}", file=sys.stderr)
            return 1
    return 0
