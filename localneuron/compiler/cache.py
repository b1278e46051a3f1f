"""The persistent compile cache (TorchNeuron's NEFF cache, contract §5.3): one file per key.

Several processes and ranks share one directory, so every write goes to a temporary file that is
renamed into place (readers never see half an entry), and whoever compiles a key holds a file lock
on it (the others wait and then load the result instead of compiling it again). Each entry carries a
checksum of its payload: a corrupt or truncated entry is reported once, removed and rebuilt.
"""
import contextlib
import fcntl
import hashlib
import os
import tempfile
import time

from localneuron.compiler import metrics
from localneuron.compiler.settings import CacheSettings, log
from localneuron.ops import tracking

MAGIC = b"LOCALNEURON-NEFF-CACHE 1\n"
LOCK_POLL_S = 0.05


class CacheEntryCorrupt(ValueError):
    """An entry's header or checksum does not match its contents."""


def encode(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b" %d\n" % len(payload) + payload


def decode(data: bytes) -> bytes:
    if not data.startswith(MAGIC):
        raise CacheEntryCorrupt("unknown header")
    header, _, payload = data[len(MAGIC):].partition(b"\n")
    digest, _, length = header.partition(b" ")
    if not length.isdigit() or int(length) != len(payload):
        raise CacheEntryCorrupt(f"truncated ({len(payload)} of {length.decode(errors='replace')} bytes)")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise CacheEntryCorrupt("checksum mismatch")
    return payload


class CompileCache:
    def __init__(self, settings: CacheSettings):
        self.settings = settings

    def path(self, key: str) -> str:
        return os.path.join(self.settings.directory, "graphs", key[:2], key + ".entry")

    def load(self, key: str) -> bytes | None:
        """The payload stored under key, or None when there is none (or it was corrupt and is now gone)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                return decode(f.read())
        except FileNotFoundError:
            return None
        except CacheEntryCorrupt as error:
            self.discard(path, str(error))
            return None

    def discard(self, path: str, reason: str) -> None:
        metrics.record_corrupt_cache_entry(path)
        tracking.warn_once(f"corrupt-cache:{path}", f"Compile cache entry {path} is corrupt ({reason}); it is "
                           "removed and the graph is compiled again.")
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def store(self, key: str, payload: bytes) -> None:
        path = self.path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode(payload))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
            raise

    @contextlib.contextmanager
    def lock(self, key: str):
        """Exclusive per-key lock; after the timeout, compile unlocked rather than wait forever."""
        os.makedirs(self.settings.lock_directory, exist_ok=True)
        path = os.path.join(self.settings.lock_directory, f"localneuron-{key}.lock")
        with open(path, "a") as f:
            deadline = time.monotonic() + self.settings.lock_timeout_s
            while True:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        log.warning("Compile cache lock %s not acquired after %.0f s (TORCH_NEURONX_NEFF_CACHE_"
                                    "LOCK_TIMEOUT); compiling without it.", path, self.settings.lock_timeout_s)
                        yield
                        return
                    time.sleep(LOCK_POLL_S)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def key_of(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode() if not isinstance(part, bytes) else part)
        h.update(b"\0")
    return h.hexdigest()
