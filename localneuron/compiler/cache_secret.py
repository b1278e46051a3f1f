"""The secret that authenticates compile-cache entries (an HMAC key): only someone who can read it can
write an entry this process will load.

By default it is per user: `$XDG_CONFIG_HOME/localneuron/cache-key` (else `~/.config/...`), 32 random
bytes created on first use, mode 0600 in a 0700 directory, and refused unless both are this user's
own. A cache shared between users or hosts (LOCALNEURON_SHARED_CACHE_KEY_FILE) uses the file the
group agreed on instead, which must be a regular file no other user can read or write.
"""
import os
import secrets
import stat

from localneuron.runtime import checked_files
from localneuron.runtime.checked_files import Untrusted
from localneuron.runtime.environment import read

KEY_BYTES = 32
MIN_SHARED_KEY_BYTES = 16
KEY_NAME = "cache-key"


def user_key_directory() -> str:
    config = read("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "localneuron")


def user_key() -> bytes:
    directory = user_key_directory()
    path = os.path.join(directory, KEY_NAME)
    dir_fd = checked_files.open_root(directory, private=True)
    try:
        checked_files.create_once(dir_fd, KEY_NAME, secrets.token_bytes(KEY_BYTES))
        fd = checked_files.open_regular(dir_fd, KEY_NAME, private=True)
        try:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            if mode & 0o077:
                raise Untrusted(f"cache key {path} is readable by other users (mode {mode:04o}); "
                                f"`chmod 600 {path}` fixes it")
            key = checked_files.read_all(fd)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
    if len(key) != KEY_BYTES:
        raise Untrusted(f"cache key {path} has {len(key)} bytes instead of {KEY_BYTES}; remove it and a new "
                        "one is made")
    return key


def shared_key(path: str) -> bytes:
    # Followed if it is a symlink: the user named this file, and secret mounts (Kubernetes) are symlinks.
    fd = os.open(path, os.O_RDONLY | checked_files.NONBLOCK | checked_files.CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"LOCALNEURON_SHARED_CACHE_KEY_FILE {path} is not a regular file")
        if st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
            raise Untrusted(f"LOCALNEURON_SHARED_CACHE_KEY_FILE {path} is readable or writable by every user "
                            f"(mode {stat.S_IMODE(st.st_mode):04o}); `chmod o-rw {path}` fixes it")
        key = checked_files.read_all(fd)
    finally:
        os.close(fd)
    if len(key) < MIN_SHARED_KEY_BYTES:
        raise Untrusted(f"LOCALNEURON_SHARED_CACHE_KEY_FILE {path} holds {len(key)} bytes; a shared key needs at "
                        f"least {MIN_SHARED_KEY_BYTES} random bytes (e.g. `head -c 32 /dev/urandom > {path}`)")
    return key
