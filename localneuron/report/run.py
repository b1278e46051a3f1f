"""`localneuron run`: runs the user's script or module like python does, then prints the portability
report and writes its JSON and HTML views; under a launcher, every rank's report is merged into one; with
--strict, the report's data decides the exit status (strict.py). cli/main.py parses the arguments into
RunOptions and calls run()."""
import os
import runpy
import sys
import traceback
from dataclasses import dataclass, field

from localneuron.report import strict


@dataclass(frozen=True)
class RunOptions:
    script: str | None             # the script, or with `module` the module's first argument
    module: str | None = None      # -m MODULE
    script_args: list = field(default_factory=list)
    json: str | None = None        # --json FILE (- for standard output)
    html: str | None = None        # --html FILE (- for standard output)
    report_to_stderr: bool = False
    strict: bool = False
    max_recompiles: int = 0


def _exit_status(exit_: SystemExit) -> int:
    """What python itself does with SystemExit's code: None is 0, an int is itself, anything else is
    printed to stderr and is 1."""
    if exit_.code is None:
        return 0
    if isinstance(exit_.code, int):
        return exit_.code
    print(exit_.code, file=sys.stderr)
    return 1


def _run_target(options: RunOptions) -> int:
    """Runs the script or module like `python SCRIPT` / `python -m MODULE`; returns its exit status."""
    if options.module:
        sys.argv = [options.module, *options.script_args]
        sys.path.insert(0, os.getcwd())
        run = lambda: runpy.run_module(options.module, run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        sys.argv = [options.script, *options.script_args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
        run = lambda: runpy.run_path(options.script, run_name="__main__")  # noqa: E731
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


def run(options: RunOptions) -> int:
    """The whole of `localneuron run`; returns its exit status (2: the setup is wrong, nothing ran)."""
    # importing this module ran localneuron/__init__.py, which registers the device even when torch's autoload
    # is disabled
    from localneuron.device import shutdown
    from localneuron.profiler import inspect_env
    from localneuron.report import portability, ranks
    from localneuron.runtime import environment
    from localneuron.runtime.checked_files import OutputError, OutputFile
    from localneuron.runtime.config import ConfigurationError, device_config

    if not options.module and not os.path.exists(options.script):
        print(f"localneuron run: no such script: {options.script}", file=sys.stderr)
        return 2
    problems = environment.problems(include_lenient=False)
    for problem in problems:
        print(f"localneuron run: {problem}", file=sys.stderr)
    if problems:
        return 2
    try:
        # the report files' directories are checked and opened now: a bad path fails before the run, not after
        outputs = {flag: OutputFile(path, flag) for flag, path in (("--json", options.json), ("--html", options.html))
                   if path}
        device_config()
        if inspect_env.start_error is not None:
            raise inspect_env.start_error
        job = ranks.current_job()  # under a launcher: every rank's report directory, opened now
    except (ConfigurationError, OutputError) as error:
        print(f"localneuron run: {error}", file=sys.stderr)
        return 2
    pid = os.getpid()
    if options.html:
        from localneuron.profiler.memory_sampler import MemorySampler

        with MemorySampler() as sampler:
            status = _run_target(options)
    else:
        status = _run_target(options)
    if os.getpid() != pid:
        return status  # a child the script forked: the report is its parent's to print
    if shutdown.report_unreported_failures("at the end of the run"):
        status = status or 1
    data = portability.collect()
    out = sys.stderr if options.report_to_stderr else sys.stdout
    if job is not None:
        data = ranks.exchange(job, data)  # every rank writes its report; rank 0 gets the merged one
    if data is None:
        return status
    print(portability.render(data), file=out)
    contents = {"--json": lambda: portability.to_json(data)}
    if options.html:
        from localneuron.report import html_page

        contents["--html"] = lambda: html_page.render(data, sampler.samples)
    for flag, output in outputs.items():
        try:
            output.write(contents[flag]())
        except OutputError as error:
            print(f"localneuron run: could not write {flag} {error.path}: {error.reason}", file=sys.stderr)
            status = status or 1
    if options.strict:
        failures = strict.failures(data, options.max_recompiles)
        for failure in failures:
            print(f"localneuron run --strict: {failure}", file=sys.stderr)
        if failures and status == 0:
            return strict.STRICT_FAILURE
    return status
