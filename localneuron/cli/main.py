"""localneuron run SCRIPT [ARGS...] | localneuron info [--ops [PATTERN]] | localneuron estimate ..."""
import argparse
import fnmatch
import json
import os
import runpy
import sys
import tempfile
import traceback


def _json_target_problem(path: str) -> str | None:
    """Why the report could not be written to `path`, checked before the script runs."""
    if os.path.isdir(path):
        return "it is a directory"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"the directory {directory} does not exist"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"the directory {directory} is not writable"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "the file is not writable"
    return None


def _write_json(data: dict, path: str) -> None:
    """Replaces `path` atomically; a failed write leaves neither a partial file nor a temporary one."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _exit_status(exit_: SystemExit) -> int:
    """What python itself does with SystemExit's code: None is 0, an int is itself, anything else is
    printed to stderr and is 1."""
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    print(exit_.code, file=sys.stderr)
    return 1

from localneuron.cli import estimate


def _run(args) -> int:
    import torch  # noqa: F401  (autoload registers the device)

    import localneuron  # noqa: F401  (in case autoload is disabled)
    from localneuron.cli import report
    from localneuron.runtime.config import ConfigurationError, device_config

    if not os.path.exists(args.script):
        print(f"localneuron run: no such script: {args.script}", file=sys.stderr)
        return 2
    problem = args.json and _json_target_problem(args.json)
    if problem:
        print(f"localneuron run: cannot write --json {args.json}: {problem}", file=sys.stderr)
        return 2
    try:
        device_config()
    except ConfigurationError as error:
        print(f"localneuron run: {error}", file=sys.stderr)
        return 2
    sys.argv = [args.script, *args.script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    pid = os.getpid()
    status = 0
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exit_:
        status = _exit_status(exit_)
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 130  # the shell's status for SIGINT; the report below is the partial run's
    except BaseException:
        traceback.print_exc()
        status = 1
    if os.getpid() != pid:
        return status  # a child the script forked: the report is its parent's to print
    data = report.collect()
    print(report.render(data), file=sys.stderr if args.report_to_stderr else sys.stdout)
    if args.json:
        try:
            _write_json(data, args.json)
        except OSError as error:
            print(f"localneuron run: could not write --json {args.json}: {error}", file=sys.stderr)
            status = status or 1
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="localneuron", description="TorchNeuron's neuron device, simulated.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a Python script on the neuron device and print the portability report")
    run.add_argument("--json", metavar="FILE", help="also write the report data as JSON")
    run.add_argument("--report-to-stderr", action="store_true", help="print the report on stderr")
    run.add_argument("script")
    run.add_argument("script_args", nargs=argparse.REMAINDER)
    run.set_defaults(handler=_run)
    info = commands.add_parser("info", help="print the simulated target, devices, versions and cache locations")
    info.add_argument("--ops", nargs="?", const="*", metavar="PATTERN",
                      help="print the op records (support rule, how it runs...) of the ops matching PATTERN")
    info.set_defaults(handler=_info)
    estimate.add_parser(commands)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
