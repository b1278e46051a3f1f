"""The compile cache under attack and under faults: every test plants, swaps, links, starves or blocks
something the way a hostile local user (or a broken disk) would, then checks that the attack's code
never ran, nothing was written outside the cache, and the compiled result still matches the CPU."""
import hashlib
import json
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_neuronx

from localneuron.compiler import cache as cache_module
from localneuron.compiler import inductor

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


class Plant:
    """Unpickling this creates the marker directory: proof that cache contents executed code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


@pytest.fixture
def paths(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("LOCALNEURON_SHARED_CACHE_KEY_FILE", raising=False)
    torch_neuronx.reset_dynamo_metrics()
    return tmp_path


def double_plus_one(x):
    return x * 2 + 1


def triple_minus_one(x):
    return x * 3 - 1


X = torch.randn(5)


def compile_and_check(fn=double_plus_one) -> str:
    """Compiles fn on the device, checks it against the CPU, returns the graph's cache result."""
    torch._dynamo.reset()
    out = torch.compile(fn, backend="neuron")(X.to("neuron")).cpu()
    torch.testing.assert_close(out, fn(X))
    return torch_neuronx.get_dynamo_metrics()[-1].cache


def entries(cache_dir) -> list:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files if f.endswith(".entry"))


def compiled_once(paths) -> tuple[str, str]:
    """Compiles double_plus_one once; its entry's path and key."""
    assert compile_and_check() == "miss"
    (entry,) = entries(paths / "cache")
    return entry, os.path.basename(entry)[:-len(".entry")]


def user_secret(paths) -> bytes:
    return (paths / "config" / "localneuron" / "cache-key").read_bytes()


def payload(graph: bytes, kernels=(), header_kernels=None) -> bytes:
    """A payload in inductor.dump()'s layout."""
    listed = header_kernels if header_kernels is not None else [
        [source, hashlib.sha256(data).hexdigest(), len(data)] for source, data in kernels]
    header = json.dumps({"graph": len(graph), "kernels": listed}).encode()
    return b"%d\n" % len(header) + header + graph + b"".join(data for _, data in kernels)


# --- planted, swapped and forged entries --------------------------------------------------------------

FORGERIES = {
    # what the old format accepted: a plain checksum anyone can recompute
    "plain checksum": lambda key, body, secret: (b"LOCALNEURON-NEFF-CACHE 1\n" + hashlib.sha256(body).hexdigest().encode()
                                                 + b" %d\n" % len(body) + body),
    "checksum where the MAC goes": lambda key, body, secret: (cache_module.MAGIC + hashlib.sha256(body).hexdigest().encode()
                                                              + b"\n" + key.encode() + b"\n" + body),
    "sealed with the attacker's own key": lambda key, body, secret: cache_module.seal(os.urandom(32), key, body),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_planted_entry_with_a_malicious_pickle_never_runs(paths, forgery):
    marker = paths / "attack-ran"
    entry, key = compiled_once(paths)
    with open(entry, "wb") as f:
        f.write(FORGERIES[forgery](key, payload(pickle.dumps(Plant(marker))), user_secret(paths)))

    with pytest.warns(UserWarning, match="is corrupt"):
        assert compile_and_check() == "miss"
    assert not marker.exists()
    assert compile_and_check() == "hit"  # the entry was rebuilt, sealed with this user's key


def test_swapped_entries_are_detected_not_computed(paths):
    compiled_once(paths)
    assert compile_and_check(triple_minus_one) == "miss"
    first, second = entries(paths / "cache")
    os.rename(first, first + ".swap")
    os.rename(second, first)
    os.rename(first + ".swap", second)

    with pytest.warns(UserWarning, match="written for another graph"):
        assert compile_and_check(double_plus_one) == "miss"  # compile_and_check compares with the CPU
    with pytest.warns(UserWarning, match="written for another graph"):
        assert compile_and_check(triple_minus_one) == "miss"


def traversal(paths, kind: str) -> list:
    """A header kernel entry naming a library outside the private directory."""
    target = os.path.relpath(paths / "attack-ran", os.path.join(inductor.private_home(), inductor.STORED_KERNELS))
    name = {"relative": target, "absolute": str(paths / "attack-ran"), "NUL": "a" * 63 + "\0/../attack-ran"}[kind]
    return [["0" * 64, name, 4]]


@pytest.mark.parametrize("kind", ["relative", "absolute", "NUL"])
def test_stored_kernel_names_cannot_leave_the_private_directory(paths, kind):
    """Even an entry that passes authentication (a bug, a stolen key) cannot name a path."""
    entry, key = compiled_once(paths)
    body = payload(pickle.dumps(Plant(paths / "attack-ran")), [("0" * 64, b"\x7fELF")], traversal(paths, kind))
    with open(entry, "wb") as f:
        f.write(cache_module.seal(user_secret(paths), key, body))

    with pytest.warns(UserWarning, match="cannot be loaded: BadPayload"):
        assert compile_and_check() == "miss"
    assert not (paths / "attack-ran").exists()


def test_kernel_bytes_changed_at_the_same_size_are_refused_even_when_resealed(paths):
    entry, key = compiled_once(paths)
    secret = user_secret(paths)
    body = bytearray(cache_module.unseal(secret, key, open(entry, "rb").read()))
    body[-100:] = bytes(100)  # the last kernel library's tail, zeroed: same size, same header
    with open(entry, "wb") as f:
        f.write(cache_module.seal(secret, key, bytes(body)))

    with pytest.warns(UserWarning, match="does not hash to its recorded sha256"):
        assert compile_and_check() == "miss"


# --- libraries planted in the code generator's directory, seen by a fresh process --------------------

CHILD = textwrap.dedent("""
    import json, torch, torch_neuronx
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh())
    x = torch.randn(3, 6)
    expected = model(x)
    out = torch.compile(model.to("neuron"), backend="neuron")(x.to("neuron")).cpu()
    torch.testing.assert_close(out, expected)
    print(json.dumps([g.cache for g in torch_neuronx.get_dynamo_metrics()]))
""")

MALICIOUS_LIBRARY = """
#include <sys/stat.h>
__attribute__((constructor)) static void attack(void) { mkdir("%s", 0700); }
"""


def run_child(root, extra_env=None) -> list:
    env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(root / "cache"),
           "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(root / "locks"), "XDG_CONFIG_HOME": str(root / "config"),
           **(extra_env or {})}
    env.pop("LOCALNEURON_SHARED_CACHE_KEY_FILE", None)
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("filled")
    assert run_child(root) == ["miss"]
    return root


def malicious_library(path, marker, size: int) -> None:
    source = path.with_suffix(".c")
    source.write_text(MALICIOUS_LIBRARY % marker)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True)
    data = path.read_bytes()
    assert len(data) <= size
    path.write_bytes(data + bytes(size - len(data)))  # an ELF file may carry trailing bytes


@pytest.mark.parametrize("plant", ["malicious library of the same size", "symlink to a malicious library",
                                   "truncated then padded to the same size"])
def test_libraries_planted_in_the_cache_are_never_loaded(filled_cache, tmp_path, plant):
    root, marker = tmp_path / "copy", tmp_path / "attack-ran"
    shutil.copytree(filled_cache, root, symlinks=True)
    libraries = [os.path.join(d, f) for d, _, files in os.walk(root / "cache") for f in files if f.endswith(".so")]
    assert libraries
    for library in libraries:
        size = os.path.getsize(library)
        if plant == "truncated then padded to the same size":
            with open(library, "r+b") as f:
                f.truncate(size // 2)
                f.truncate(size)
            continue
        bad = tmp_path / f"bad-{os.path.basename(library)}"
        malicious_library(bad, marker, size)
        if plant == "symlink to a malicious library":
            os.remove(library)
            os.symlink(bad, library)
        else:
            shutil.copyfile(bad, library)
    assert run_child(root) == ["hit"]  # run_child checks the result against the CPU
    assert not marker.exists()


def test_the_host_cpu_capability_is_part_of_the_key(filled_cache, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(filled_cache, root, symlinks=True)
    assert run_child(root, {"ATEN_CPU_CAPABILITY": "default"}) == ["miss"]


# --- symlinks --------------------------------------------------------------------------------------------

def test_symlinked_lock_file_is_not_followed(paths):
    entry, key = compiled_once(paths)
    os.remove(entry)
    target, lock = paths / "created-by-attack", paths / "locks" / f"localneuron-{key}.lock"
    os.remove(lock)
    os.symlink(target, lock)
    with pytest.warns(UserWarning, match="cannot lock"):
        assert compile_and_check() == "miss"
    assert not target.exists()


def test_symlinked_entry_is_not_read_and_is_replaced_not_written_through(paths):
    entry, _ = compiled_once(paths)
    elsewhere = paths / "elsewhere.entry"
    os.rename(entry, elsewhere)
    before = elsewhere.read_bytes()
    os.symlink(elsewhere, entry)
    with pytest.warns(UserWarning, match="cannot read"):
        assert compile_and_check() == "miss"
    assert elsewhere.read_bytes() == before and not os.path.islink(entry)
    assert compile_and_check() == "hit"


def test_symlinked_entry_directory_is_not_followed(paths):
    entry, _ = compiled_once(paths)
    outside = paths / "outside"
    outside.mkdir()
    shutil.rmtree(paths / "cache" / "graphs")
    os.symlink(outside, paths / "cache" / "graphs")
    with pytest.warns(UserWarning, match="cannot write"):
        assert compile_and_check() == "miss"
    assert os.listdir(outside) == []


@needs_root
def test_cache_root_symlinked_by_another_user_is_refused(paths, monkeypatch):
    real = paths / "real"
    real.mkdir(mode=0o700)
    link = paths / "link"
    os.symlink(real, link)
    os.lchown(link, OTHER_UID, OTHER_UID)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(link))
    with pytest.warns(UserWarning, match="symlink owned by uid 65534"):
        assert compile_and_check() == "miss"
    assert entries(real) == []


def plant_key(paths, data: bytes = b"k" * 32):
    key_dir = paths / "config" / "localneuron"
    key_dir.mkdir(parents=True, mode=0o700)
    key_file = key_dir / "cache-key"
    key_file.write_bytes(data)
    os.chmod(key_file, 0o600)
    return key_file


def test_symlinked_cache_key_is_refused(paths):
    stolen = plant_key(paths)
    os.rename(stolen, paths / "known-key")
    os.symlink(paths / "known-key", stolen)
    with pytest.warns(UserWarning, match="key cannot be used"):
        assert compile_and_check() == "miss"
    assert entries(paths / "cache") == []


# --- owners and modes ------------------------------------------------------------------------------------

@needs_root
def test_cache_root_owned_by_another_user_is_refused(paths):
    (paths / "cache").mkdir(mode=0o700)
    os.chown(paths / "cache", OTHER_UID, OTHER_UID)
    with pytest.warns(UserWarning, match=r"cache .*cache is not used: .*owned by uid 65534"):
        assert compile_and_check() == "miss"
    assert compile_and_check() == "miss"  # read nothing from it either
    assert entries(paths / "cache") == []


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702], ids=lambda mode: f"{mode:04o}")
def test_cache_root_writable_by_others_is_refused(paths, mode):
    (paths / "cache").mkdir()
    os.chmod(paths / "cache", mode)
    with pytest.warns(UserWarning, match=f"writable by other users \\(mode 0{mode:o}\\).*chmod go-w"):
        assert compile_and_check() == "miss"
    assert entries(paths / "cache") == []


@pytest.mark.parametrize("sticky", [False, True])
def test_parent_writable_by_everyone_needs_the_sticky_bit(paths, monkeypatch, sticky):
    shared = paths / "shared-tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777 if sticky else 0o777)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(shared / "cache"))
    if sticky:
        assert compile_and_check() == "miss"
        assert len(entries(shared / "cache")) == 1
        assert os.stat(shared / "cache").st_mode & 0o777 == 0o700
    else:
        with pytest.warns(UserWarning, match="writable by every user without the sticky bit"):
            assert compile_and_check() == "miss"
        assert entries(shared / "cache") == []


@needs_root
def test_entry_owned_by_another_user_is_refused(paths):
    entry, _ = compiled_once(paths)
    os.chown(entry, OTHER_UID, OTHER_UID)
    with pytest.warns(UserWarning, match="owned by uid 65534"):
        assert compile_and_check() == "miss"


@pytest.mark.parametrize("damage", ["owner", "mode", "FIFO", "short"])
def test_cache_key_that_is_not_this_users_own_secret_is_refused(paths, damage):
    key_file = plant_key(paths)
    if damage == "owner":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(key_file, OTHER_UID, OTHER_UID)
    elif damage == "mode":
        os.chmod(key_file, 0o644)
    elif damage == "FIFO":
        os.remove(key_file)
        os.mkfifo(key_file)
    else:
        key_file.write_bytes(b"k" * 8)
    with pytest.warns(UserWarning, match="key cannot be used"):
        assert compile_and_check() == "miss"
    assert entries(paths / "cache") == []


@needs_root
def test_lock_directory_of_another_user_is_not_used_but_the_cache_still_is(paths):
    (paths / "locks").mkdir(mode=0o700)
    os.chown(paths / "locks", OTHER_UID, OTHER_UID)
    with pytest.warns(UserWarning, match="lock directory .* is not used"):
        assert compile_and_check() == "miss"
    assert os.listdir(paths / "locks") == []
    assert compile_and_check() == "hit"


@needs_root
def test_debug_directory_of_another_user_gets_no_artifacts(paths, monkeypatch):
    debug = paths / "debug"
    debug.mkdir(mode=0o700)
    os.chown(debug, OTHER_UID, OTHER_UID)
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(debug))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    with pytest.warns(UserWarning, match="artifacts not kept"):
        compile_and_check()
    assert os.listdir(debug) == []


def test_model_name_cannot_place_artifacts_outside_the_debug_directory(paths, monkeypatch):
    debug = paths / "debug" / "inner"
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(debug))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    torch._dynamo.reset()
    fn = torch.compile(double_plus_one, backend="neuron", options={"model_name": "../../../escaped"})
    torch.testing.assert_close(fn(X.to("neuron")).cpu(), double_plus_one(X))
    inside = [f for _, _, files in os.walk(debug) for f in files]
    assert len(inside) == 3 and all(f.startswith(".._.._.._escaped_") for f in inside)
    assert not any("escaped" in f for f in os.listdir(paths)) and not (paths / "debug" / "escaped").exists()


def test_default_locations_are_per_user():
    from localneuron.runtime import environment

    for name in ("TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "TORCH_NEURONX_DEBUG_DIR"):
        assert environment.BY_NAME[name].default.endswith(f"-{os.geteuid()}")


def test_new_cache_and_key_are_private(paths):
    compiled_once(paths)
    for directory in ("cache", "locks", "config/localneuron"):
        assert os.stat(paths / directory).st_mode & 0o777 == 0o700
    assert os.stat(paths / "config" / "localneuron" / "cache-key").st_mode & 0o777 == 0o600


# --- a cache shared on purpose ----------------------------------------------------------------------------

@pytest.fixture
def shared(paths, monkeypatch):
    key = paths / "team-key"
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o640)
    monkeypatch.setenv("LOCALNEURON_SHARED_CACHE_KEY_FILE", str(key))
    (paths / "cache").mkdir()
    os.chmod(paths / "cache", 0o777)
    return key


def test_shared_cache_is_used_and_still_checked_entry_by_entry(paths, shared):
    assert compile_and_check() == "miss"
    assert compile_and_check() == "hit"
    assert not (paths / "cache" / "host-kernels").exists()  # the code generator never works in a shared directory
    (entry,) = entries(paths / "cache")
    key = os.path.basename(entry)[:-len(".entry")]
    with open(entry, "wb") as f:  # another member of the group, without the key
        f.write(cache_module.seal(os.urandom(32), key, payload(pickle.dumps(Plant(paths / "attack-ran")))))
    with pytest.warns(UserWarning, match="is corrupt"):
        assert compile_and_check() == "miss"
    assert not (paths / "attack-ran").exists()


def test_shared_key_readable_by_everyone_is_refused(paths, shared):
    os.chmod(shared, 0o644)
    with pytest.warns(UserWarning, match="readable or writable by every user"):
        assert compile_and_check() == "miss"
    assert entries(paths / "cache") == []


# --- faults: the compile goes on without the cache ------------------------------------------------------

@pytest.fixture
def no_hang():
    """Fails a test that blocks (an open of a FIFO) instead of hanging the suite."""
    def hung(*_):
        raise AssertionError("blocked")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(300)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_fifo_at_entry_path_neither_blocks_nor_fails(paths, no_hang):
    entry, _ = compiled_once(paths)
    os.remove(entry)
    os.mkfifo(entry)
    with pytest.warns(UserWarning, match="not a regular file"):
        assert compile_and_check() == "miss"
    assert compile_and_check() == "hit"  # the store replaced the FIFO


def test_fifo_at_lock_path_neither_blocks_nor_fails(paths, no_hang):
    entry, key = compiled_once(paths)
    os.remove(entry)
    os.remove(paths / "locks" / f"localneuron-{key}.lock")
    os.mkfifo(paths / "locks" / f"localneuron-{key}.lock")
    with pytest.warns(UserWarning, match="cannot lock .*not a regular file"):
        assert compile_and_check() == "miss"
    assert compile_and_check() == "hit"


def test_directory_at_entry_path(paths):
    entry, _ = compiled_once(paths)
    os.remove(entry)
    os.mkdir(entry)
    with pytest.warns(UserWarning) as warned:
        assert compile_and_check() == "miss"
    messages = " ".join(str(w.message) for w in warned)
    assert "not a regular file" in messages and "cannot write" in messages


@pytest.mark.parametrize("where", ["cache", "cache/graphs"])
def test_file_where_a_directory_should_be(paths, where):
    if where != "cache":
        (paths / "cache").mkdir(mode=0o700)
    (paths / where).write_bytes(b"not a directory")
    with pytest.warns(UserWarning, match="Not a directory"):
        assert compile_and_check() == "miss"


@pytest.fixture
def tmpfs(paths):
    mounted = []

    def mount(options: str):
        target = paths / f"mnt{len(mounted)}"
        target.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"{options},mode=0700", "tmpfs", str(target)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=True)


def test_read_only_cache(paths, monkeypatch, tmpfs):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmpfs("ro")))
    with pytest.warns(UserWarning, match="Read-only file system"):
        assert compile_and_check() == "miss"


def test_full_disk(paths, monkeypatch, tmpfs):
    disk = tmpfs("size=256k")
    with open(disk / "filler", "wb", buffering=0) as f:
        with pytest.raises(OSError, match="No space left"):
            while True:
                f.write(bytes(4096))
                f.flush()
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(disk))
    with pytest.warns(UserWarning, match="No space left on device"):
        assert compile_and_check() == "miss"
    assert compile_and_check() == "miss"


# --- a stopped lock holder costs at most TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT -------------------------

HOLDER = textwrap.dedent("""
    import fcntl, os, signal, sys
    fds = [os.open(path, os.O_RDWR | os.O_CREAT) for path in sys.argv[1:]]
    for fd in fds:
        fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
""")


@pytest.fixture
def stopped_holder():
    holders = []

    def hold(paths_to_lock):
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, *map(str, paths_to_lock)], stdout=subprocess.PIPE,
                                  text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "locked"
        return holder

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()


def test_stopped_holder_of_the_cache_lock(paths, monkeypatch, caplog, stopped_holder, no_hang):
    entry, key = compiled_once(paths)
    os.remove(entry)
    stopped_holder([paths / "locks" / f"localneuron-{key}.lock"])
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "1")
    with caplog.at_level(logging.WARNING, logger="localneuron.compiler"):
        assert compile_and_check() == "miss"
    assert "not acquired after 1 s" in caplog.text


def test_stopped_holder_of_the_code_generators_locks(paths, stopped_holder):
    """Inductor's own file locks (one per kernel) are bounded by the same timeout."""
    root = paths / "child"
    assert run_child(root) == ["miss"]
    for entry in entries(root / "cache"):
        os.remove(entry)
    locks = sorted((root / "cache" / "host-kernels" / "locks").iterdir())
    assert locks
    stopped_holder(locks)
    env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(root / "cache"),
           "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(root / "locks"), "XDG_CONFIG_HOME": str(root / "config"),
           "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT": "2"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["miss"]
    assert "Code generator lock" in done.stderr
