"""localneuron run SCRIPT [ARGS...] | localneuron info [--ops [PATTERN]] | localneuron estimate ..."""
import argparse
import fnmatch
import os
import runpy
import sys
import traceback

from localneuron.cli import estimate


def _exit_status(exit_: SystemExit) -> int:
    """What python itself does with SystemExit's code: None is 0, an int is itself, anything else is
    printed to stderr and is 1."""
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    print(exit_.code, file=sys.stderr)
    return 1

STRICT_FAILURE = 3  # exit status of `localneuron run --strict` when the run itself succeeded


def _run_target(args) -> int:
    """Runs the script or module like `python SCRIPT` / `python -m MODULE`; returns its exit status."""
    if args.module:
        sys.argv = [args.module, *args.script_args]
        sys.path.insert(0, os.getcwd())
        run = lambda: runpy.run_module(args.module, run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        sys.argv = [args.script, *args.script_args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
        run = lambda: runpy.run_path(args.script, run_name="__main__")  # noqa: E731
    try:
        run()
    except SystemExit as exit_:
        return _exit_status(exit_)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130  # the shell's status for SIGINT; the report printed after is the partial run's
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _strict_failures(data: dict, max_recompiles: int) -> list[str]:
    failures = []
    if data["cpu_fallback_ops"]:
        failures.append(f"{len(data['cpu_fallback_ops'])} ops fell back to the CPU: "
                        + ", ".join(data["cpu_fallback_ops"]))
    recompiles = len(data.get("compile", {}).get("recompiles", []))
    if recompiles > max_recompiles:
        failures.append(f"{recompiles} recompiles (more than --max-recompiles {max_recompiles})")
    return failures


def _run(args) -> int:
    import torch  # noqa: F401  (autoload registers the device)

    import localneuron  # noqa: F401  (in case autoload is disabled)
    from localneuron.device import shutdown
    from localneuron.profiler import inspect_env
    from localneuron.report import portability, ranks
    from localneuron.runtime import environment
    from localneuron.runtime.checked_files import OutputError, OutputFile
    from localneuron.runtime.config import ConfigurationError, device_config

    if not args.module and not os.path.exists(args.script):
        print(f"localneuron run: no such script: {args.script}", file=sys.stderr)
        return 2
    problems = environment.problems(include_lenient=False)
    for problem in problems:
        print(f"localneuron run: {problem}", file=sys.stderr)
    if problems:
        return 2
    try:
        # the report files' directories are checked and opened now: a bad path fails before the run, not after
        outputs = {flag: OutputFile(path, flag) for flag, path in (("--json", args.json), ("--html", args.html)) if path}
        device_config()
        if inspect_env.start_error is not None:
            raise inspect_env.start_error
        job = ranks.current_job()  # under a launcher: every rank's report directory, opened now
    except (ConfigurationError, OutputError) as error:
        print(f"localneuron run: {error}", file=sys.stderr)
        return 2
    pid = os.getpid()
    if args.html:
        from localneuron.profiler.memory_sampler import MemorySampler

        with MemorySampler() as sampler:
            status = _run_target(args)
    else:
        status = _run_target(args)
    if os.getpid() != pid:
        return status  # a child the script forked: the report is its parent's to print
    if shutdown.report_unreported_failures("at the end of the run"):
        status = status or 1
    data = portability.collect()
    out = sys.stderr if args.report_to_stderr else sys.stdout
    if job is not None:
        data = ranks.exchange(job, data)  # every rank writes its report; rank 0 gets the merged one
    if data is None:
        return status
    print(portability.render(data), file=out)
    contents = {"--json": lambda: portability.to_json(data)}
    if args.html:
        from localneuron.report import html_page

        contents["--html"] = lambda: html_page.render(data, sampler.samples)
    for flag, output in outputs.items():
        try:
            output.write(contents[flag]())
        except OutputError as error:
            print(f"localneuron run: could not write {flag} {error.path}: {error.reason}", file=sys.stderr)
            status = status or 1
    if args.strict:
        failures = _strict_failures(data, args.max_recompiles)
        for failure in failures:
            print(f"localneuron run --strict: {failure}", file=sys.stderr)
        if failures and status == 0:
            return STRICT_FAILURE
    return status


def _info(args) -> int:
    import torch

    import localneuron
    from localneuron.runtime import environment
    from localneuron.runtime.config import ConfigurationError, device_config

    if args.ops is not None:
        from localneuron.ops.op_records import OPS, describe

        pattern = args.ops if any(c in args.ops for c in "*?[") else f"*{args.ops}*"
        matches = [op for op in sorted(OPS) if fnmatch.fnmatchcase(op, pattern)]
        for op in matches:
            print(describe(op, OPS[op]))
        if not matches:
            print(f"no op record matches {args.ops!r}; ops without a record run natively (unlisted)")
        return 0

    print(f"localneuron {localneuron.__version__} (torch {torch.__version__}, python {sys.version.split()[0]})")
    status = 0
    try:
        config = device_config()
    except ConfigurationError as error:
        print(f"simulated device: not configured: {error}")
        status = 1
    else:
        t = config.target
        print(f"simulated target: {t.name} (NeuronCore {t.nc_version}), LOCALNEURON_TARGET to change")
        print(f"visible NeuronCores: {len(config.visible_cores)} {list(config.visible_cores)}")
        print(f"HBM per NeuronCore: {config.hbm_bytes_per_core / (1 << 30):.1f} GiB")
        print(f"device module: torch.neuron (available: {torch.neuron.is_available()})")
    print(f"compile cache: {environment.read('TORCH_NEURONX_NEFF_CACHE_DIR')}")
    print(f"compile artifacts: {environment.read('TORCH_NEURONX_DEBUG_DIR')}")
    print("environment:")
    for name, value in environment.describe():
        print(f"  {name:<50} {value}")
        status = 1 if value.startswith("INVALID") else status
    return status


RUN_OPTIONS_WITH_VALUES = ("--json", "--max-recompiles", "--html")


def _split_module_args(argv: list[str]) -> list[str]:
    """`run [options] -m MODULE ARGS...`: removes and returns ARGS (argparse would read them as options)."""
    if not argv or argv[0] != "run":
        return []
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        i += 2 if argv[i] in RUN_OPTIONS_WITH_VALUES else 1
    if i + 1 < len(argv) and argv[i] == "-m":
        rest = argv[i + 2:]
        del argv[i + 2:]
        return rest
    return []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="localneuron", description="TorchNeuron's neuron device, simulated.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a Python script on the neuron device and print the portability report")
    run.add_argument("--json", metavar="FILE", help="also write the report data as JSON (- for standard output)")
    run.add_argument("--html", metavar="FILE",
                     help="also write the report as a self-contained HTML page with charts (- for standard output)")
    run.add_argument("--report-to-stderr", action="store_true", help="print the report on stderr")
    run.add_argument("--strict", action="store_true",
                     help=f"exit with status {STRICT_FAILURE} if any op falls back to the CPU or the run recompiles "
                          "more than --max-recompiles times (for CI of ported code)")
    run.add_argument("--max-recompiles", type=int, default=0, metavar="N",
                     help="recompiles --strict tolerates (default 0: static shapes compile once)")
    run.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    run.add_argument("script", nargs="?", help="the script (or, with -m, the module's first argument)")
    run.add_argument("script_args", nargs=argparse.REMAINDER)
    run.set_defaults(handler=_run)
    info = commands.add_parser("info", help="print the simulated target, devices, versions and cache locations")
    info.add_argument("--ops", nargs="?", const="*", metavar="PATTERN",
                      help="print the op records (support rule, how it runs...) of the ops matching PATTERN")
    info.set_defaults(handler=_info)
    estimate.add_parser(commands)
    argv = list(sys.argv[1:] if argv is None else argv)
    module_args = _split_module_args(argv)
    argv, script_args = estimate.split_script_arguments(argv) if argv[:1] == ["estimate"] else (argv, [])
    args = parser.parse_args(argv)
    if args.command == "estimate":
        args.script_args = script_args
    if args.command == "run":
        if args.module:
            args.script_args = module_args
        elif args.script is None:
            parser.error("run: give a script, or -m MODULE")
        if args.max_recompiles < 0:
            parser.error("run: --max-recompiles must be 0 or more")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
