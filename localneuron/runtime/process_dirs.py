"""A private temporary directory that lives as long as the process that made it.

It is removed when the process exits. A process that ends without exiting (SIGKILL, a SIGTERM it does not handle,
os._exit in a forked child: what vLLM does to its engines and torchrun to its ranks) cannot remove it, so the next
process that makes one removes the abandoned ones. Abandoned is decided by a lock, not a process id (ids are reused,
and another pid namespace may share the temporary directory): the owner holds an exclusive flock on the directory's
`owner` file for its whole life, the kernel releases it whatever ends the process, and a forked child that inherited
the descriptor keeps it held too. Only directories of this user, under this name, are ever considered; anything else
at such a name (another user's, a symlink, a file) is left alone.
"""
import atexit
import fcntl
import os
import shutil
import stat
import tempfile
import time

OWNER_FILE = "owner"
# a directory without its owner file is one being made (mkdtemp, then the lock): left alone unless this old
UNLOCKED_GRACE_S = 600.0

_made: dict[str, tuple[int, str, int]] = {}  # prefix -> (pid, directory, descriptor holding the lock)


def process_directory(prefix: str) -> str:
    """A 0700 directory named prefix + random under the temporary directory, of this process's own (a forked child
    makes its own), removed when it exits."""
    made = _made.get(prefix)
    if made is None or made[0] != os.getpid():
        remove_abandoned(prefix)
        directory = tempfile.mkdtemp(prefix=prefix)
        descriptor = os.open(os.path.join(directory, OWNER_FILE), os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW,
                             0o600)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        made = _made[prefix] = (os.getpid(), directory, descriptor)
        atexit.register(_remove, *made)
    return made[1]


def remove_abandoned(prefix: str) -> list[str]:
    """Removes this user's directories named prefix + ... whose owner is gone; returns them."""
    removed = []
    parent = tempfile.gettempdir()
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for entry in entries:
        path = entry.path
        try:
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            if _abandoned(path, info):
                shutil.rmtree(path, ignore_errors=True)  # does not follow symlinks inside
                removed.append(path)
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return removed


def _abandoned(path: str, info: os.stat_result) -> bool:
    try:
        descriptor = os.open(os.path.join(path, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW)  # flock needs no write
    except FileNotFoundError:
        return time.time() - info.st_mtime > UNLOCKED_GRACE_S
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its owner (or a child of it) lives
    finally:
        os.close(descriptor)  # releases the lock just taken, if it was
    return True


def _remove(pid: int, directory: str, descriptor: int) -> None:
    if os.getpid() != pid:  # a forked child that inherited the exit handler
        return
    shutil.rmtree(directory, ignore_errors=True)
    try:
        os.close(descriptor)
    except OSError:
        pass
