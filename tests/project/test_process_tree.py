"""The tests' process-tree kill (tests/support/process_tree.py): a launcher that runs out of time is stopped with
every process below it, also those in sessions of their own that hold its pipes, so the test that reads the pipes
ends instead of waiting for the rest of the suite (a fresh-clone run hung 21 minutes on such an orphan rank)."""
import subprocess
import sys
import time

from process_tree import descendants, kill_tree

# a launcher whose worker starts a session of its own (as torchrun's agent starts ranks) and a grandchild of
# its own; every process inherits the launcher's stdout
LAUNCHER = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", '''
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("ready", flush=True)
time.sleep(600)
'''], start_new_session=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has ended
    except FileNotFoundError:
        return True


def _wait_for(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_kill_tree_ends_workers_in_their_own_sessions_and_frees_the_pipes():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True)
    try:
        assert launcher.stdout.readline().strip() == "ready"
        assert _wait_for(lambda: len(descendants(launcher.pid)) >= 2), "the worker's child never started"
        tree = descendants(launcher.pid)
        kill_tree(launcher.pid)
        # every process that held the pipe is gone, so reading it ends
        launcher.communicate(timeout=30)
        assert launcher.returncode == -9
        assert _wait_for(lambda: all(_gone(pid) for pid in tree)), [p for p in tree if not _gone(p)]
    finally:
        if launcher.poll() is None:
            launcher.kill()


def test_kill_tree_of_an_ended_process_is_harmless():
    kill_tree(2 ** 22 + 7)  # above pid_max's default: no such process
