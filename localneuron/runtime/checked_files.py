"""Every file localneuron writes or trusts goes through here: opened without following links and without
ever blocking, in directories checked for type, owner and mode before anything in them is used.

Everything below a checked directory goes through its file descriptor (dir_fd), so a directory that is
renamed or replaced by a symlink after its check is never followed: what was checked is what is used.

Two kinds of directory:
- private (the compile cache, its key, compile artifacts): this user's own, writable by nobody else;
- output (profiles, reports, estimates, memory snapshots, rank reports; OutputDirectory, OutputFile):
  this user's own or root's, and writable by nobody else unless the sticky bit keeps others from renaming
  or removing what is not theirs (/tmp). Directories localneuron creates there are 0755 and this user's.
Both are reached from / one component at a time (open_path), each directory opened through its parent's
descriptor: every directory on the way must pass the output rule, and a symlink on the way is followed only
when it is this user's or root's.
Files are written atomically: a temporary file with an unpredictable name, created exclusively in the same
checked directory, then renamed over the name (a symlink planted at the name is replaced, never followed).
What is already at the name is never replaced unless it is a regular file or a symlink: writing to the null
device discards, "-", /dev/stdout and /dev/stderr are this process's standard streams, and a directory, FIFO,
socket or other device is refused. Appending (write_output(append=True)) opens the name itself: a regular file of this
user's only, never through a symlink.
A path that cannot be used raises OutputError naming it (and the component refused) and saying what to do;
the checks are made when the run starts (the directory is opened then and its descriptor kept), not when the
files are written.
"""
import errno
import os
import secrets
import stat
import sys

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted where a file should be must not hang the open
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
OUTPUT_DIRECTORY_MODE = 0o755
OUTPUT_FILE_MODE = 0o644
NULL_DEVICE = os.makedev(1, 3)  # Linux's /dev/null: writing to it discards, so it is a place to write nothing
SPECIAL_FILES = ((stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                 (stat.S_ISBLK, "block device"))


class Untrusted(Exception):
    """A path the cache must not use; the message names it and says what to do."""


def _uid() -> int:
    return os.geteuid()


def _private_problem(st: os.stat_result, path: str, what: str) -> str | None:
    """Why st is not this user's own and writable by nobody else, or None."""
    if st.st_uid != _uid():
        return f"{what} {path} is owned by uid {st.st_uid}, not by you (uid {_uid()})"
    if st.st_mode & OTHERS_WRITE:
        return (f"{what} {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
                f"`chmod go-w {path}` fixes it")
    return None


def check_owned(st: os.stat_result, path: str, what: str) -> None:
    """Owned by this user and writable by nobody else."""
    problem = _private_problem(st, path, what)
    if problem is not None:
        raise Untrusted(problem)


def _output_problem(st: os.stat_result, subject: str = "it") -> str | None:
    """Why a directory (subject: "it", or the path of one on the way to it) cannot hold this user's output, or
    None."""
    if st.st_uid not in (_uid(), 0):
        return (f"{subject} belongs to uid {st.st_uid}, not to you (uid {_uid()}) or root: that user could replace "
                "what is written there; choose a directory of your own")
    if st.st_mode & OTHERS_WRITE and not st.st_mode & stat.S_ISVTX:
        writers = "every user" if st.st_mode & stat.S_IWOTH else "its group"
        return (f"{subject} is writable by {writers} without the sticky bit (mode {stat.S_IMODE(st.st_mode):04o}), so "
                "others could swap what is in it; choose a directory of your own")
    return None


def _reason(error: BaseException) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


MAX_SYMLINKS = 40  # as the kernel: more links than this on one path is a loop


def open_path(path: str, *, create_mode: int | None, final_problem=_output_problem) -> int:
    """The directory at path as a descriptor, reached from / one component at a time, each opened through its
    parent's descriptor without following links, so no component can be swapped between its check and its use.
    Every directory on the way must pass _output_problem, the last one final_problem (st, its name -> why not, or
    None); a symlink on the way is followed only when it is this user's or root's (the kernel's
    protected_symlinks rule, for every component, not only in sticky directories). create_mode: missing
    components are made (the last one with this mode, those before it 0755); None: FileNotFoundError. Untrusted
    says which component is refused."""
    pending = [part for part in os.path.join(os.getcwd(), path).split("/") if part]
    pending.reverse()  # a stack: a followed symlink pushes its target's components
    # O_PATH: a directory on the way needs only search permission, as for the kernel's own walk (0711 homes)
    flags = getattr(os, "O_PATH", os.O_RDONLY) | DIRECTORY | NOFOLLOW | CLOEXEC
    opened = [os.open("/", flags)]  # descriptors of the walked directories, for ".."
    walked = [""]                   # their paths, for messages
    links = 0
    try:
        while pending:
            name = pending.pop()
            here = os.path.join(walked[-1], name) if walked[-1] else "/" + name
            subject = "it" if not pending else here  # what messages call it: the path itself, or one on its way
            if name == ".":
                continue
            if name == "..":
                if len(opened) > 1:
                    os.close(opened.pop())
                    walked.pop()
                continue
            try:
                fd = os.open(name, flags, dir_fd=opened[-1])
            except FileNotFoundError:
                if create_mode is None:
                    raise FileNotFoundError(errno.ENOENT, f"{os.strerror(errno.ENOENT)}: {here}") from None
                try:
                    os.mkdir(name, create_mode if not pending else OUTPUT_DIRECTORY_MODE, dir_fd=opened[-1])
                except FileExistsError:
                    pass
                pending.append(name)  # opened, and checked, as if it had been there
                continue
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                link = os.stat(name, dir_fd=opened[-1], follow_symlinks=False)
                if not stat.S_ISLNK(link.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, f"{os.strerror(errno.ENOTDIR)}: {here}") from None
                if link.st_uid not in (_uid(), 0):
                    raise Untrusted(f"{subject} is a symlink owned by uid {link.st_uid}, not by you (uid {_uid()}) or "
                                    "root: that user could point it anywhere; remove it or choose a path of your own")
                links += 1
                if links > MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, f"too many symlinks on the way to {path}") from None
                target = os.readlink(name, dir_fd=opened[-1])
                if target.startswith("/"):
                    while len(opened) > 1:
                        os.close(opened.pop())
                        walked.pop()
                pending.extend(reversed([part for part in target.split("/") if part]))
                continue
            opened.append(fd)
            walked.append(here)
            if pending:
                problem = _output_problem(os.fstat(fd), here)
                if problem is not None:
                    raise Untrusted(problem)
        problem = final_problem(os.fstat(opened[-1]), "it")  # checked here also when path leads back to /
        if problem is not None:
            raise Untrusted(problem)
        return os.open(".", os.O_RDONLY | DIRECTORY | NONBLOCK | CLOEXEC, dir_fd=opened[-1])  # readable, to list
    finally:
        for fd in opened:
            os.close(fd)


def open_root(path: str, *, private: bool) -> int:
    """The directory at path as a descriptor, created 0700 if missing. private: it must be this user's own (owner,
    mode), reached through open_path (no other user's directory or symlink on the way). Not private (the opt-in
    compile cache shared by users, whose entries are authenticated): the directory its owner named, as named."""
    if private:
        return open_path(path, create_mode=0o700, final_problem=lambda st, _: _private_problem(st, path, "directory"))
    if not os.path.isdir(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    return os.open(path, os.O_RDONLY | DIRECTORY | NONBLOCK | CLOEXEC)


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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_temporary(dir_fd: int, data: bytes, mode: int) -> str:
    name = f".tmp-{secrets.token_hex(8)}"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, mode, dir_fd=dir_fd)
    try:
        _write_all(fd, data)
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


# --- Output files: what runs leave for the user ---



class OutputError(Exception):
    """A file or directory localneuron cannot write safely; the message names it and says what is wrong."""

    def __init__(self, what: str, path: str, reason: str):
        super().__init__(f"cannot write {what} {path}: {reason}")
        self.what, self.path, self.reason = what, path, reason


def _open_output_root(path: str, what: str, create: bool) -> int:
    try:
        fd = open_path(path, create_mode=OUTPUT_DIRECTORY_MODE if create else None)
    except (OSError, Untrusted) as error:
        raise OutputError(what, path, _reason(error)) from None
    # root writes anywhere: access() also answers for a root whose capabilities were dropped
    if not os.access(".", os.W_OK | os.X_OK, dir_fd=fd):
        os.close(fd)
        raise OutputError(what, path, "you cannot create files in it (it is read-only to you)")
    return fd


class OutputDirectory:
    """A directory files are written into, checked and opened once (when the run starts); every write goes
    through its descriptor. create: made (0755, with missing parents) when missing."""

    _fd: int | None = None   # until the directory is open (a refused one never is, and __del__ still runs)

    def __init__(self, path: str, *, what: str = "into", create: bool = True, _fd: int | None = None):
        self.path = path
        self.what = what
        self._fd = _open_output_root(path, what, create) if _fd is None else _fd

    def subdirectory(self, name: str, *, exclusive: bool = False) -> "OutputDirectory":
        """name inside this directory, never through a symlink, this user's own; created if missing
        (exclusive: it must not exist yet)."""
        path = os.path.join(self.path, name)
        try:
            try:
                os.mkdir(name, OUTPUT_DIRECTORY_MODE, dir_fd=self._fd)
            except FileExistsError:
                if exclusive:
                    raise
            fd = os.open(name, os.O_RDONLY | DIRECTORY | NOFOLLOW | NONBLOCK | CLOEXEC, dir_fd=self._fd)
        except OSError as error:
            if error.errno == errno.ELOOP or isinstance(error, NotADirectoryError):
                raise OutputError(self.what, path, "it is a symlink or not a directory; remove it") from None
            raise OutputError(self.what, path, _reason(error)) from None
        st = os.fstat(fd)
        if st.st_uid != _uid() or st.st_mode & OTHERS_WRITE:
            os.close(fd)
            raise OutputError(self.what, path, f"it belongs to uid {st.st_uid} or others can write to it (mode "
                                               f"{stat.S_IMODE(st.st_mode):04o}); remove it")
        return OutputDirectory(path, what=self.what, _fd=fd)

    def _replaceable(self, name: str) -> bool:
        """Whether name may be (re)written: nothing, a regular file or a symlink is there (a symlink is replaced,
        never followed). False for the null device: writing to it is discarding, so nothing is written. Anything
        else (a directory, a FIFO, a socket, another device) raises OutputError: it is never replaced."""
        try:
            st = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return True
        except OSError as error:
            raise OutputError(self.what, os.path.join(self.path, name), _reason(error)) from None
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            return True
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == NULL_DEVICE:
            return False
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(self.what, os.path.join(self.path, name), "it is a directory; name a file")
        kind = next(kind for test, kind in SPECIAL_FILES if test(st.st_mode))
        raise OutputError(self.what, os.path.join(self.path, name),
                          f"it is a {kind}, not a regular file, and localneuron never replaces one; name a regular "
                          "file (or - for standard output)")

    def _open_path(self, name: str) -> str:
        """name's path, while the directory is still open."""
        path = os.path.join(self.path, name)
        if self._fd is None:
            raise OutputError(self.what, path, "its directory was closed")
        return path

    def write(self, name: str, data: bytes | str, mode: int = OUTPUT_FILE_MODE) -> str:
        """Writes name atomically (readers see the old file or the whole new one); returns its path."""
        path = self._open_path(name)
        if not self._replaceable(name):
            return path
        try:
            write_atomic(self._fd, name, data.encode() if isinstance(data, str) else data, mode)
        except IsADirectoryError:
            raise OutputError(self.what, path, "it is a directory") from None
        except OSError as error:
            raise OutputError(self.what, path, _reason(error)) from None
        return path

    def append(self, name: str, data: bytes | str, mode: int = OUTPUT_FILE_MODE) -> str:
        """Appends to name (created if missing), which must be a regular file of this user's that nobody else
        can write: never through a symlink, never into another user's file, never blocking on a FIFO."""
        path = self._open_path(name)
        if not self._replaceable(name):
            return path
        try:
            fd = open_regular(self._fd, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode, private=True)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise OutputError(self.what, path, "it is a symlink; remove it") from None
            raise OutputError(self.what, path, _reason(error)) from None
        except Untrusted as error:
            raise OutputError(self.what, path, f"{error}; remove it") from None
        try:
            _write_all(fd, data.encode() if isinstance(data, str) else data)
        except OSError as error:
            raise OutputError(self.what, path, _reason(error)) from None
        finally:
            os.close(fd)
        return path

    def read(self, name: str) -> bytes | None:
        """The regular file name, this user's own, never through a symlink; None when there is none usable."""
        try:
            return read_regular(self._fd, name, private=True)
        except (OSError, Untrusted):
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        self.close()


# Names of the standard streams: writing there writes to this process's stream (never replaces the name)
STANDARD_STREAMS = {"-": "stdout", "/dev/stdout": "stdout", "/proc/self/fd/1": "stdout", "/dev/fd/1": "stdout",
                    "/dev/stderr": "stderr", "/proc/self/fd/2": "stderr", "/dev/fd/2": "stderr"}


def _write_stream(stream_name: str, data: bytes | str) -> None:
    stream = getattr(sys, stream_name)
    if isinstance(data, bytes):
        stream.flush()  # what was printed before comes first
        stream.buffer.write(data)
    else:
        stream.write(data)
    stream.flush()


class OutputFile:
    """A file a run writes when it ends (a report, an estimate), its directory checked and opened now. "-",
    /dev/stdout and /dev/stderr (also as /proc/self/fd/1 or 2) name this process's standard output or error."""

    directory: "OutputDirectory | None" = None   # None for a standard stream

    def __init__(self, path: str, what: str = "the file"):
        self.path = path
        self.stream = STANDARD_STREAMS.get(path)
        if self.stream is not None:
            return
        # not normalised: "link/.." is the parent of the link's target, as the kernel resolves it
        directory, self.name = os.path.split(os.path.join(os.getcwd(), path))
        if self.name in ("", ".", ".."):
            raise OutputError(what, path, "it is a directory; name a file")
        try:
            self.directory = OutputDirectory(directory, what=what, create=False)
        except OutputError as error:
            raise OutputError(what, path, f"its directory {directory}: {error.reason}") from None
        try:
            self.directory._replaceable(self.name)  # refused now, before the run, not when it ends
        except OutputError as error:
            self.close()
            raise OutputError(what, path, error.reason) from None

    def write(self, data: bytes | str) -> str:
        return self._to_file(OutputDirectory.write, data)

    def append(self, data: bytes | str) -> str:
        return self._to_file(OutputDirectory.append, data)

    def _to_file(self, operation, data: bytes | str) -> str:
        if self.stream is not None:
            _write_stream(self.stream, data)
            return self.path
        try:
            return operation(self.directory, self.name, data)
        except OutputError as error:
            raise OutputError(error.what, self.path, error.reason) from None

    def close(self) -> None:
        if self.directory is not None:
            self.directory.close()


def write_output(path: str, data: bytes | str, what: str = "the file", append: bool = False) -> str:
    """Writes one file now, in its checked directory: atomically, or with `append` added to its end (a log of
    lines: see OutputDirectory.append)."""
    out = OutputFile(path, what)
    try:
        return out.append(data) if append else out.write(data)
    finally:
        out.close()
