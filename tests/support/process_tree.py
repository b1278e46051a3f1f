"""Stopping a command and everything it started. Launchers put their workers in sessions of their own (torchrun's
elastic agent starts each rank with `start_new_session=True`), so killing the launcher's process group leaves the
ranks running, orphaned, and still holding the pipes the test reads: the test then waits for an end of file that
never comes. The tree is found through /proc's parent links, which survive a new session."""
import os
import signal


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # the command name is in parentheses and may hold spaces or ')': the fields after the last ')'
                # are state, then the parent's pid
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while the table was read
        children.setdefault(parent, []).append(int(entry))
    return children


def descendants(pid: int) -> set[int]:
    """Every process below pid, at the time of the call."""
    children, found, waiting = _children_by_parent(), set(), [pid]
    while waiting:
        for child in children.get(waiting.pop(), ()):
            if child not in found:
                found.add(child)
                waiting.append(child)
    return found


def _signal(pids, signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def kill_tree(pid: int) -> None:
    """SIGKILLs pid and every process below it. The tree is stopped first, until a walk finds nothing new, so no
    process can start a child between the walk and the kill; a killed parent's children would otherwise be
    re-parented to init and lost to the walk."""
    stopped = {pid}
    _signal(stopped, signal.SIGSTOP)
    while True:
        found = descendants(pid) | {p for parent in stopped for p in descendants(parent)}
        new = found - stopped
        if not new:
            break
        _signal(new, signal.SIGSTOP)
        stopped |= new
    _signal(stopped, signal.SIGKILL)
