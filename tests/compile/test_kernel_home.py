"""The private directory a compiling process keeps its host kernels in (localneuron/runtime/process_dirs.py): removed
when the process exits, and, when the process was killed instead (as vLLM's engines and torchrun's ranks are), by the
next process that compiles; a directory whose owner still runs, or that is not this user's, is never touched."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from localneuron.compiler.inductor import KERNEL_HOME_PREFIX
from localneuron.runtime import process_dirs

PREFIX = "localneuron-test-home-"
OTHER_UID = 65534  # nobody

COMPILE = """
import os, signal, torch, localneuron
from localneuron.compiler import inductor
f = torch.compile(lambda x: x * 2 + 1, backend="neuron")
x = torch.randn(8)
assert torch.equal(f(x.to("neuron")).cpu(), x * 2 + 1)
print(inductor.private_home(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


NEXT = "from localneuron.compiler import inductor\nprint(inductor.private_home())\n"


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """The temporary directory, the test's own; and no directory made yet by this process (each test makes its own)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(process_dirs, "_made", {})
    return tmp_path


def homes(directory, prefix=PREFIX) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith(prefix))


def holder(directory) -> subprocess.Popen:
    """Another process that makes a directory and lives on; its path is its first line."""
    code = ("import sys, tempfile, time\nfrom localneuron.runtime import process_dirs\ntempfile.tempdir = sys.argv[1]\n"
            f"print(process_dirs.process_directory({PREFIX!r}), flush=True)\ntime.sleep(600)\n")
    process = subprocess.Popen([sys.executable, "-c", code, str(directory)], stdout=subprocess.PIPE, text=True)
    process.made = process.stdout.readline().strip()
    assert os.path.isdir(process.made), process.made
    return process


def test_a_killed_compiling_process_leaves_its_kernels_to_the_next_one(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache")}
    killed = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = killed.stdout.strip()
    assert os.path.dirname(left) == str(tmp_path) and os.path.isdir(left)  # what used to stay for good
    # the next process to need a kernel directory (what a compile asks for first), then exits
    done = subprocess.run([sys.executable, "-c", NEXT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() != left and homes(tmp_path, KERNEL_HOME_PREFIX) == []  # the killed one's, its own


def test_a_directory_whose_owner_lives_is_kept_and_removed_once_it_is_killed(temporary):
    owner = holder(temporary)
    try:
        assert process_dirs.remove_abandoned(PREFIX) == []
        mine = process_dirs.process_directory(PREFIX)
        assert homes(temporary) == sorted(os.path.basename(p) for p in (owner.made, mine))
    finally:
        owner.kill()
        owner.wait()
    assert process_dirs.remove_abandoned(PREFIX) == [owner.made]
    assert homes(temporary) == [os.path.basename(mine)]  # this process still holds its own
    assert process_dirs.process_directory(PREFIX) == mine


def test_a_forked_child_makes_its_own_and_its_parents_stays_while_either_lives(temporary):
    parent_home = process_dirs.process_directory(PREFIX)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(reader)
        os.write(writer, process_dirs.process_directory(PREFIX).encode())
        os._exit(0)  # no exit handler: its directory is abandoned
    os.close(writer)
    child_home = os.read(reader, 4096).decode()
    os.close(reader)
    os.waitpid(child, 0)
    assert child_home != parent_home
    assert process_dirs.remove_abandoned(PREFIX) == [child_home]
    assert homes(temporary) == [os.path.basename(parent_home)]


def test_a_directory_being_made_is_left_alone_until_it_is_old(temporary):
    fresh = temporary / f"{PREFIX}fresh"
    fresh.mkdir(mode=0o700)  # made, its owner file not yet
    old = temporary / f"{PREFIX}old"
    old.mkdir(mode=0o700)
    long_ago = time.time() - process_dirs.UNLOCKED_GRACE_S - 60
    os.utime(old, (long_ago, long_ago))
    assert process_dirs.remove_abandoned(PREFIX) == [str(old)]
    assert homes(temporary) == [fresh.name]


def test_links_and_files_at_the_name_are_not_followed_or_removed(temporary):
    target = temporary / "precious"
    target.mkdir()
    (target / "data").write_text("keep me")
    (temporary / f"{PREFIX}link").symlink_to(target)
    (temporary / f"{PREFIX}file").write_text("keep me too")
    assert process_dirs.remove_abandoned(PREFIX) == []
    assert (target / "data").read_text() == "keep me" and (temporary / f"{PREFIX}file").read_text() == "keep me too"
    assert os.path.islink(temporary / f"{PREFIX}link")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_abandoned_directory_is_not_ours_to_remove(temporary):
    theirs = temporary / f"{PREFIX}theirs"
    theirs.mkdir(mode=0o700)
    (theirs / process_dirs.OWNER_FILE).write_text("")
    os.chown(theirs / process_dirs.OWNER_FILE, OTHER_UID, OTHER_UID)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    assert process_dirs.remove_abandoned(PREFIX) == []
    assert theirs.is_dir()


def test_a_planted_owner_link_is_not_followed(temporary):
    planted = temporary / f"{PREFIX}planted"
    planted.mkdir(mode=0o700)
    victim = temporary / "victim"
    victim.write_text("keep me")
    (planted / process_dirs.OWNER_FILE).symlink_to(victim)
    assert process_dirs.remove_abandoned(PREFIX) == []  # the link is not opened, so nothing says the owner is gone
    assert victim.read_text() == "keep me" and planted.is_dir()
