"""localneuron run SCRIPT [ARGS...] | localneuron info [--ops [PATTERN]]"""
import argparse
import fnmatch
import json
import os
import runpy
import sys


def _run(args) -> int:
    import torch  # noqa: F401  (autoload registers the device)

    import localneuron  # noqa: F401  (in case autoload is disabled)
    from localneuron.cli import report

    if not os.path.exists(args.script):
        print(f"localneuron run: no such script: {args.script}", file=sys.stderr)
        return 2
    sys.argv = [args.script, *args.script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    status = 0
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    data = report.collect()
    print(report.render(data), file=sys.stderr if args.report_to_stderr else sys.stdout)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, args.json)
    return status


def _info(args) -> int:
    import torch

    import localneuron
    from localneuron.compiler.settings import env
    from localneuron.runtime.config import device_config

    if args.ops is not None:
        from localneuron.ops.op_records import OPS, describe

        pattern = args.ops if any(c in args.ops for c in "*?[") else f"*{args.ops}*"
        matches = [op for op in sorted(OPS) if fnmatch.fnmatchcase(op, pattern)]
        for op in matches:
            print(describe(op, OPS[op]))
        if not matches:
            print(f"no op record matches {args.ops!r}; ops without a record run natively (unlisted)")
        return 0

    config = device_config()
    t = config.target
    print(f"localneuron {localneuron.__version__} (torch {torch.__version__}, python {sys.version.split()[0]})")
    print(f"simulated target: {t.name} (NeuronCore {t.nc_version}), LOCALNEURON_TARGET to change")
    print(f"visible NeuronCores: {len(config.visible_cores)} {list(config.visible_cores)}")
    print(f"HBM per NeuronCore: {config.hbm_bytes_per_core / (1 << 30):.1f} GiB")
    print(f"device module: torch.neuron (available: {torch.neuron.is_available()})")
    print(f"compile cache: {env('TORCH_NEURONX_NEFF_CACHE_DIR')}")
    print(f"compile artifacts: {env('TORCH_NEURONX_DEBUG_DIR')}")
    return 0


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
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
