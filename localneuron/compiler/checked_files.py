"""Directories and files the compile cache may trust: opened without following links and without ever
blocking, and checked for type, owner and mode before anything in them is used.

Everything below a checked directory goes through its file descriptor (dir_fd), so a directory that is
renamed or replaced by a symlink after its check is never followed: what was checked is what is used.
"""
import os
import secrets
import stat

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted where a file should be must not hang the open
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class Untrusted(Exception):
    """A path the cache must not use; the message names it and says what to do."""


def _uid() -> int:
    return os.geteuid()


def check_owned(st: os.stat_result, path: str, what: str) -> None:
    """Owned by this user and writable by nobody else."""
    if st.st_uid != _uid():
        raise Untrusted(f"{what} {path} is owned by uid {st.st_uid}, not by you (uid {_uid()})")
    if st.st_mode & OTHERS_WRITE:
        raise Untrusted(f"{what} {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
                        f"`chmod go-w {path}` fixes it")


def _check_ancestors(path: str) -> None:
    """Whoever can rename an ancestor can swap the directory for another one: refuse ancestors writable by
    other users unless the sticky bit (/tmp) keeps them from renaming what is not theirs."""
    parent = os.path.dirname(path)
    while parent and parent != path:
        st = os.stat(parent)
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            raise Untrusted(f"{parent}, a parent of {path}, is writable by every user without the sticky bit")
        path, parent = parent, os.path.dirname(parent)


def open_root(path: str, *, private: bool) -> int:
    """The directory at path as a descriptor, created 0700 if missing. private: it must be this user's own
    (owner, mode, a symlink to it owned by this user or root, no ancestor others can rename)."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        link = os.lstat(path)
    if private and stat.S_ISLNK(link.st_mode) and link.st_uid not in (0, _uid()):
        raise Untrusted(f"{path} is a symlink owned by uid {link.st_uid}, not by you (uid {_uid()})")
    fd = os.open(path, os.O_RDONLY | DIRECTORY | NONBLOCK | CLOEXEC)
    try:
        if private:
            check_owned(os.fstat(fd), path, "directory")
            _check_ancestors(os.path.realpath(path))
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_subdir(dir_fd: int, name: str, *, private: bool, create: bool) -> int:
    """The subdirectory name of dir_fd as a descriptor, never through a symlink; created 0700 if missing and
    create, else FileNotFoundError."""
    flags = os.O_RDONLY | DIRECTORY | NOFOLLOW | NONBLOCK | CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            pass
        fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        if private:
            check_owned(os.fstat(fd), name, "directory")
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_regular(dir_fd: int, name: str, flags: int = os.O_RDONLY, mode: int = 0o600, *, private: bool) -> int:
    """name in dir_fd opened with flags, refusing symlinks and anything but a regular file (of this user's)."""
    fd = os.open(name, flags | NOFOLLOW | NONBLOCK | CLOEXEC, mode, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"{name} is not a regular file")
        if private:
            check_owned(st, name, "file")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def read_regular(dir_fd: int, name: str, *, private: bool) -> bytes | None:
    """The contents of the regular file name in dir_fd, or None when there is none."""
    try:
        fd = open_regular(dir_fd, name, private=private)
    except FileNotFoundError:
        return None
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def _write_temporary(dir_fd: int, data: bytes, mode: int) -> str:
    name = f".tmp-{secrets.token_hex(8)}"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return name


def write_atomic(dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Readers see the old file or the whole new one; a symlink at name is replaced, never followed."""
    temporary = _write_temporary(dir_fd, data, mode)
    try:
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(temporary, dir_fd=dir_fd)
        raise


def create_once(dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> bool:
    """Writes name whole unless it exists (then False): of several processes creating it, one wins."""
    temporary = _write_temporary(dir_fd, data, mode)
    try:
        os.link(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary, dir_fd=dir_fd)
