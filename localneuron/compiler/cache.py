"""The persistent compile cache (TorchNeuron's NEFF cache, docs/support-matrix.md#torchcompile): one file per key.

Trust model: nothing in the cache directory is believed until checked. Every entry is sealed with an
HMAC under a secret only its writers can read (cache_secret.py) over the entry's own key and payload,
so a planted, altered, truncated or swapped entry is refused before any of it is used. A private
cache (the default) must also be this user's own directory (runtime/checked_files.py); a shared one
(LOCALNEURON_SHARED_CACHE_KEY_FILE) may belong to anyone, its entries being checked one by one anyway.

Several processes and ranks share one directory, so every write goes to a temporary file that is
renamed into place (readers never see half an entry), and whoever compiles a key holds a file lock
on it (the others wait, at most TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT, and then load the result).
A cache that cannot be used (not ours, read-only, full, something other than a file at an entry's
path) costs one warning and the graph is compiled without it: a cache fault never fails a compile.
"""
import contextlib
import fcntl
import hashlib
import hmac
import os
import time

from localneuron.compiler import cache_secret, metrics
from localneuron.compiler.settings import CacheSettings, log
from localneuron.ops import tracking
from localneuron.runtime import checked_files
from localneuron.runtime.checked_files import Untrusted

MAGIC = b"LOCALNEURON-NEFF-CACHE 2\n"
MAC_HEX = 64
LOCK_POLL_S = 0.05
ENTRIES = "graphs"
KERNEL_HOME = "host-kernels"  # the code generator's own directory while it compiles (inductor.py)
KERNEL_HOME_MIN_FREE = 64 << 20  # bytes; a large graph's kernel sources and libraries take tens of MB
ADVICE = ("set TORCH_NEURONX_NEFF_CACHE_DIR to a directory of your own, or LOCALNEURON_SHARED_CACHE_KEY_FILE "
          "to share a cache on purpose")


class CacheEntryCorrupt(ValueError):
    """An entry that fails authentication, or was sealed for another key."""


def _mac(secret: bytes, key: str, payload: bytes) -> bytes:
    mac = hmac.new(secret, MAGIC, hashlib.sha256)
    mac.update(key.encode() + b"\n")
    mac.update(payload)
    return mac.hexdigest().encode()


def seal(secret: bytes, key: str, payload: bytes) -> bytes:
    return MAGIC + _mac(secret, key, payload) + b"\n" + key.encode() + b"\n" + payload


def unseal(secret: bytes, key: str, data: bytes) -> bytes:
    """The payload of an entry sealed with secret for key; CacheEntryCorrupt otherwise."""
    if not data.startswith(MAGIC):
        raise CacheEntryCorrupt("unknown header")
    parts = data[len(MAGIC):].split(b"\n", 2)
    if len(parts) != 3:
        raise CacheEntryCorrupt("truncated header")
    mac, stored_key, payload = parts
    try:
        stored_key = stored_key.decode("ascii")
    except UnicodeDecodeError:
        raise CacheEntryCorrupt("unreadable key") from None
    if len(mac) != MAC_HEX or not hmac.compare_digest(mac, _mac(secret, stored_key, payload)):
        raise CacheEntryCorrupt("authentication failed: altered, truncated, or not written with your cache key")
    if stored_key != key:
        raise CacheEntryCorrupt(f"it was written for another graph ({stored_key[:12]}...)")
    return payload


def _fault(path: str, action: str, error: BaseException) -> None:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    tracking.warn_once(f"cache-fault:{action}:{path}:{reason}",
                       f"Compile cache: cannot {action} {path} ({reason}); compiling without the cache there.")


class CompileCache:
    def __init__(self, settings: CacheSettings):
        self.settings = settings
        self.private = settings.shared_key_file is None
        self._opened = False
        self._root_fd: int | None = None
        self._secret: bytes | None = None

    def _open(self) -> bool:
        """Whether the cache can be used at all: its directory and key are checked once per process."""
        if not self._opened:
            self._opened = True
            directory = self.settings.directory
            try:
                if self.private:
                    self._secret = cache_secret.user_key()
                else:
                    self._secret = cache_secret.shared_key(self.settings.shared_key_file)
            except (OSError, Untrusted) as error:
                tracking.warn_once(f"cache-key:{error}", f"Compile cache not used: its key cannot be used ({error}). "
                                   "Compiling without the cache.")
                return False
            try:
                self._root_fd = checked_files.open_root(directory, private=self.private)
            except Untrusted as error:
                tracking.warn_once(f"cache-untrusted:{directory}", f"Compile cache {directory} is not used: {error}. "
                                   f"Compiling without the cache; {ADVICE}.")
            except OSError as error:
                _fault(directory, "use", error)
        return self._root_fd is not None

    def path(self, key: str) -> str:
        return os.path.join(self.settings.directory, ENTRIES, key[:2], key + ".entry")

    @contextlib.contextmanager
    def _entry_dir(self, key: str, create: bool):
        fd = checked_files.open_subdir(self._root_fd, ENTRIES, private=self.private, create=create)
        try:
            sub = checked_files.open_subdir(fd, key[:2], private=self.private, create=create)
        finally:
            os.close(fd)
        try:
            yield sub
        finally:
            os.close(sub)

    def load(self, key: str) -> bytes | None:
        """The payload stored under key, or None when there is none usable (a bad entry is removed)."""
        if not self._open():
            return None
        path = self.path(key)
        try:
            with self._entry_dir(key, create=False) as dir_fd:
                data = checked_files.read_regular(dir_fd, key + ".entry", private=self.private)
                if data is None:
                    return None
                try:
                    return unseal(self._secret, key, data)
                except CacheEntryCorrupt as error:
                    self._discard(dir_fd, key, str(error))
                    return None
        except FileNotFoundError:
            return None
        except (OSError, Untrusted) as error:
            _fault(path, "read", error)
            return None

    def discard(self, key: str, reason: str) -> None:
        """Removes an entry that passed authentication but cannot be loaded."""
        try:
            with self._entry_dir(key, create=False) as dir_fd:
                self._discard(dir_fd, key, reason)
        except (OSError, Untrusted) as error:
            _fault(self.path(key), "remove", error)

    def _discard(self, dir_fd: int, key: str, reason: str) -> None:
        path = self.path(key)
        metrics.record_corrupt_cache_entry(path)
        tracking.warn_once(f"corrupt-cache:{path}", f"Compile cache entry {path} is corrupt ({reason}); it is "
                           "removed and the graph is compiled again.")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(key + ".entry", dir_fd=dir_fd)

    def store(self, key: str, payload: bytes) -> None:
        if not self._open():
            return
        try:
            with self._entry_dir(key, create=True) as dir_fd:
                checked_files.write_atomic(dir_fd, key + ".entry", seal(self._secret, key, payload))
        except (OSError, Untrusted) as error:
            _fault(self.path(key), "write", error)

    def kernel_home(self) -> str | None:
        """The code generator's working directory, kept between processes: only inside a private cache
        (the code generator loads what it finds there without checking it)."""
        if not (self.private and self._open()):
            return None
        try:
            disk = os.fstatvfs(self._root_fd)
            if disk.f_bavail * disk.f_frsize < KERNEL_HOME_MIN_FREE:
                return None  # the code generator fails on a full disk: it builds in the private directory instead
            os.close(checked_files.open_subdir(self._root_fd, KERNEL_HOME, private=True, create=True))
        except (OSError, Untrusted) as error:
            _fault(os.path.join(self.settings.directory, KERNEL_HOME), "use", error)
            return None
        return os.path.join(self.settings.directory, KERNEL_HOME)

    def _lock_path(self, key: str) -> str:
        return os.path.join(self.settings.lock_directory, f"localneuron-{key}.lock")

    def _lock_file(self, key: str) -> int | None:
        directory, name = os.path.split(self._lock_path(key))
        try:
            dir_fd = checked_files.open_root(directory, private=self.private)
        except Untrusted as error:
            tracking.warn_once(f"cache-untrusted:{directory}", f"Compile cache lock directory {directory} is not used: "
                               f"{error}. Compiling without locks; set TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR to a "
                               "directory of your own.")
            return None
        except OSError as error:
            _fault(directory, "use", error)
            return None
        try:
            return checked_files.open_regular(dir_fd, name, os.O_RDWR | os.O_CREAT, private=self.private)
        except (OSError, Untrusted) as error:
            _fault(os.path.join(directory, name), "lock", error)
            return None
        finally:
            os.close(dir_fd)

    @contextlib.contextmanager
    def lock(self, key: str, deadline: float):
        """Exclusive per-key lock; after the deadline (time.monotonic()), or when no lock file can be used,
        compile unlocked rather than wait forever."""
        fd = self._lock_file(key)
        if fd is None:
            yield
            return
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        log.warning("Compile cache lock %s not acquired after %.0f s (TORCH_NEURONX_NEFF_CACHE_"
                                    "LOCK_TIMEOUT); compiling without it.", self._lock_path(key),
                                    self.settings.lock_timeout_s)
                        yield
                        return
                    time.sleep(LOCK_POLL_S)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def key_of(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode() if not isinstance(part, bytes) else part)
        h.update(b"\0")
    return h.hexdigest()
