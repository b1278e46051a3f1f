"""localneuron run SCRIPT [ARGS...] | localneuron info [--ops [PATTERN]] | localneuron estimate ...

Parses the arguments and calls the command's entry point: localneuron/report/run.py, localneuron/report/info.py,
localneuron/estimate/command.py (tests/project/test_cli_only_parses.py holds this module to that)."""
import argparse
import sys

from localneuron.cli import estimate
from localneuron.estimate import command
from localneuron.report import info as report_info, run as report_run, strict


def _options(args) -> dict:
    """The parsed arguments, without argparse's dispatch fields, as the entry point's options take them."""
    return {name: value for name, value in vars(args).items() if name not in ("command", "handler")}


def _run(args) -> int:
    return report_run.run(report_run.RunOptions(**_options(args)))


def _info(args) -> int:
    return report_info.info() if args.ops is None else report_info.ops(args.ops)


def _estimate(args) -> int:
    return command.run(command.EstimateOptions(**_options(args)))


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
                     help=f"exit with status {strict.STRICT_FAILURE} if any op falls back to the CPU or the run "
                          "recompiles more than --max-recompiles times (for CI of ported code)")
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
    estimate.add_parser(commands).set_defaults(handler=_estimate)
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
