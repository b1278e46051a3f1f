"""Runs the `localneuron` command in a child process (or its main() in this one), and writes the scripts the
command tests run."""
import contextlib
import io
import os
import subprocess
import sys
import textwrap


def localneuron(*args, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    """`localneuron ARGS...` as a user runs it (python -m, so the checkout under test is the one run)."""
    return subprocess.run([sys.executable, "-m", "localneuron.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


def localneuron_in_process(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """`localneuron ARGS...` through the command's main() in this process, with its standard streams captured: the
    same code as the command, without the 3 s a fresh interpreter spends importing torch and Dynamo. Only for
    commands that run no user code and leave no state behind (`estimate --hf-config`); an exception main() does not
    turn into an exit status propagates, failing the test. The command as a process is localneuron()'s."""
    from localneuron.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(args))
            except SystemExit as stopped:  # argparse's refusals and --help
                status = stopped.code if isinstance(stopped.code, int) else (0 if stopped.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    return subprocess.CompletedProcess(["localneuron", *args], status, out.getvalue(), err.getvalue())


def write(path, code: str):
    path.write_text(textwrap.dedent(code))
    return path


def lines_of(path, *needles) -> dict:
    """needle -> line number of the (only) source line containing it."""
    text = path.read_text().splitlines()
    found = {}
    for needle in needles:
        hits = [i + 1 for i, line in enumerate(text) if needle in line]
        assert len(hits) == 1, (needle, hits)
        found[needle] = hits[0]
    return found
