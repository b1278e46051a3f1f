"""Every file localneuron writes (profiles, run reports, estimates, memory snapshots, rank reports, the NKI Library
plugin's estimates) is created without following symlinks, in a directory checked when the run starts and reached
from / one component at a time (every directory on the way this user's or root's, and writable by nobody else unless
sticky; a symlink on the way only if this user's or root's), atomically; a FIFO, socket, device or directory at the
name is never replaced (the null device discards, -, /dev/stdout and /dev/stderr are the standard streams); and a
path that cannot be used is one error naming it (localneuron/runtime/checked_files.py). The attacks are planted
by another local user: the tests switch to an unused uid for them, which needs root."""
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from cli_runner import localneuron, localneuron_in_process
from fresh_python import run_python
from localneuron.report import ranks
from localneuron.profiler import profile_files
from localneuron.runtime.checked_files import OutputDirectory, OutputError, OutputFile, write_output
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler

OTHER_UID = 54321  # no account needed: root may take any uid
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="planting files as another local user needs root "
                                                         "(to switch to that user's uid); run the suite as root")
ESTIMATE_CONFIG = Path(__file__).resolve().parents[2] / "benchmarks" / "configs" / "llama-2-13b.json"


def as_other_user(*command: str) -> None:
    subprocess.run(command, user=OTHER_UID, group=OTHER_UID, check=True, timeout=60)


@pytest.fixture
def shared():
    """A directory every user may write to, with the sticky bit, like /tmp (and outside pytest's 0700 tmp)."""
    path = Path(tempfile.mkdtemp(prefix="localneuron-shared-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def secret(tmp_path):
    """A directory only its owner may use, holding a file the attacks aim at."""
    path = tmp_path / "secret"
    path.mkdir(mode=0o700)
    (path / "victim.txt").write_text("precious\n")
    return path


def untouched(secret: Path) -> bool:
    return sorted(p.name for p in secret.iterdir()) == ["victim.txt"] and (secret / "victim.txt").read_text() == "precious\n"


# --- the one module ---

def test_a_symlink_at_the_name_is_replaced_never_followed(tmp_path, secret):
    (tmp_path / "out.json").symlink_to(secret / "victim.txt")
    write_output(str(tmp_path / "out.json"), "{}")
    assert not (tmp_path / "out.json").is_symlink() and (tmp_path / "out.json").read_text() == "{}"
    assert untouched(secret)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "secret"]  # no temporary file left


def test_writes_go_to_the_directory_checked_at_start_even_if_its_path_is_swapped(tmp_path, secret):
    out = OutputDirectory(str(tmp_path / "out"))
    (tmp_path / "out").rename(tmp_path / "moved")
    (tmp_path / "out").symlink_to(secret)
    out.write("report.json", "{}")
    assert (tmp_path / "moved" / "report.json").read_text() == "{}" and untouched(secret)


@pytest.mark.parametrize("problem, reason", [
    ("a file", "Not a directory: "),
    ("missing parent, create=False", "No such file or directory: "),
    ("writable by others, not sticky", "it is writable by every user without the sticky bit (mode 0777)"),
])
def test_an_unusable_directory_is_one_error_naming_it(tmp_path, problem, reason):
    path = tmp_path / "d"
    if problem == "a file":
        path.write_text("")
    elif problem == "writable by others, not sticky":
        path.mkdir()
        path.chmod(0o777)
    else:
        path = tmp_path / "missing" / "d"
    with pytest.raises(OutputError) as error:
        OutputDirectory(str(path), what="the test output", create=problem != "missing parent, create=False")
    assert str(error.value).startswith(f"cannot write the test output {path}: ") and reason in str(error.value)


@ROOT_ONLY
@pytest.mark.parametrize("plant", ["directory", "symlink"])
def test_another_users_directory_or_symlink_is_refused(shared, secret, plant):
    planted = shared / "out"
    if plant == "directory":
        as_other_user("mkdir", "-m", "777", str(planted))
    else:
        as_other_user("ln", "-s", str(secret), str(planted))
    with pytest.raises(OutputError, match=f"cannot write the report {planted}: it (belongs to|is a symlink owned by) "
                                          f"uid {OTHER_UID}"):
        OutputDirectory(str(planted), what="the report")
    assert untouched(secret)


@ROOT_ONLY
def test_a_sticky_shared_directory_takes_files_and_replaces_planted_links(shared, secret):
    as_other_user("ln", "-s", str(secret / "victim.txt"), str(shared / "report.json"))
    write_output(str(shared / "report.json"), "{}")
    assert (shared / "report.json").read_text() == "{}" and not (shared / "report.json").is_symlink()
    assert untouched(secret)


# --- the profiler ---

def traced():
    x = torch.randn(8, 8, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (x @ x).relu().sum().item()
    return prof


def test_a_profile_directory_swapped_mid_write_gets_nothing_written_into_it(tmp_path, secret, monkeypatch):
    """The swap once made root overwrite files in a root-only directory: the writer followed the new path."""
    cfg = NeuronConfig(profile_output_dir=str(tmp_path / "profiles"))
    profiler = NeuronProfiler(cfg)
    summary = profile_files._summary

    def swap_then_summarise(trace, steps):  # after trace.json and system_profile.json, before the rest
        [stamp] = [p for p in (tmp_path / "profiles").rglob("*") if p.is_dir() and p.parent.name.endswith(
            f"_pid_{os.getpid()}")]
        stamp.rename(tmp_path / "moved")
        stamp.symlink_to(secret)
        return summary(trace, steps)

    monkeypatch.setattr(profile_files, "_summary", swap_then_summarise)
    profiler.export_trace(traced())
    assert untouched(secret)
    assert {"trace.json", "system_profile.json", "summary.json", "ops.csv"} <= {p.name for p in (tmp_path / "moved").iterdir()}


@ROOT_ONLY
def test_a_planted_process_directory_is_refused_not_followed(shared, secret):
    profiler = NeuronProfiler(NeuronConfig(profile_output_dir=str(shared)))
    name = f"{profile_files.instance_name()}_pid_{os.getpid()}"  # what the profiler names this process's directory
    as_other_user("ln", "-s", str(secret), str(shared / name))
    with pytest.raises(OutputError, match=f"{name}: it is a symlink or not a directory"):
        profiler.export_trace(traced())
    assert untouched(secret)


@ROOT_ONLY
def test_the_profiler_refuses_another_users_output_directory_before_profiling(shared, secret):
    as_other_user("ln", "-s", str(secret), str(shared / "output"))
    with pytest.raises(OutputError, match=f"cannot write the profile \\(profile_output_dir\\) {shared / 'output'}"):
        NeuronProfiler(NeuronConfig(profile_output_dir=str(shared / "output")))
    assert untouched(secret)


INSPECTED = "import torch\nx = torch.ones(4, device='neuron')\nprint('ran', (x * 2).sum().item())\n"


@pytest.mark.parametrize("problem", ["a file", "read-only", "another user's"])
def test_a_bad_inspect_output_directory_is_reported_at_start_and_the_run_goes_on(tmp_path, shared, secret, problem):
    output = tmp_path / "output"
    command = []
    if problem == "a file":
        output.write_text("")
    elif problem == "read-only":
        output.mkdir(mode=0o555)
        # root writes anywhere; without its capabilities, it is a user for whom the directory is read-only
        command = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to drop root's capabilities")
    else:
        if os.geteuid() != 0:
            pytest.skip("planting a directory as another local user needs root")
        output = shared / "output"
        as_other_user("ln", "-s", str(secret), str(output))
    env = {**os.environ, "NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_OUTPUT_DIR": str(output)}
    r = subprocess.run([*command, sys.executable, "-c", INSPECTED], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ran 8.0" in r.stdout
    assert f"no NEURON_RT_INSPECT_* profile will be written: cannot write the profile (NEURON_RT_INSPECT_OUTPUT_DIR) " \
           f"{output}" in r.stderr
    assert "could not load the neuron device" not in r.stderr and "Traceback" not in r.stderr
    assert untouched(secret)
    script = tmp_path / "job.py"
    script.write_text(INSPECTED)
    run = subprocess.run([*command, sys.executable, "-m", "localneuron.cli.main", "run", str(script)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 2 and "NEURON_RT_INSPECT_OUTPUT_DIR" in run.stderr and "ran 8.0" not in run.stdout


def test_a_bad_inspect_value_names_the_variable_and_the_device_works():
    r = run_python(INSPECTED, env={"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_DEVICE_PROFILE": "always"})
    assert r.returncode == 0 and "ran 8.0" in r.stdout
    assert "NEURON_RT_INSPECT_DEVICE_PROFILE='always' is not valid" in r.stderr
    assert "could not load the neuron device" not in r.stderr


# --- the command line, snapshots, rank reports ---

@ROOT_ONLY
def test_estimate_json_never_writes_through_a_planted_temporary_name(shared, secret):
    out = shared / "estimate.json"
    as_other_user("ln", "-s", str(secret / "victim.txt"), str(out) + ".tmp")
    as_other_user("ln", "-s", str(secret / "victim.txt"), str(out))
    r = localneuron_in_process("estimate", "--hf-config", str(ESTIMATE_CONFIG), "--target", "trn1", "--tp", "32",
                               "--mode", "decode", "--input-len", "128", "--output-len", "128", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert untouched(secret) and not out.is_symlink() and json.loads(out.read_text())["fits"] is True


@ROOT_ONLY
def test_estimate_json_in_another_users_directory_fails_before_the_estimate(shared, secret):
    as_other_user("mkdir", "-m", "777", str(shared / "theirs"))
    out = shared / "theirs" / "estimate.json"
    r = localneuron_in_process("estimate", "--hf-config", str(ESTIMATE_CONFIG), "--mode", "train", "--json", str(out))
    assert r.returncode == 2 and f"cannot write --json {out}: its directory {shared / 'theirs'}: it belongs to uid " \
                                  f"{OTHER_UID}" in r.stderr
    assert "time per" not in r.stdout and not out.exists()


@ROOT_ONLY
@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_run_reports_replace_planted_links_and_refuse_other_users_directories(tmp_path, shared, secret, flag):
    script = tmp_path / "job.py"
    script.write_text("import torch\ntorch.ones(2, device='neuron').sum()\n")
    target = shared / "report"
    as_other_user("ln", "-s", str(secret / "victim.txt"), str(target))
    r = localneuron("run", flag, str(target), str(script))
    assert r.returncode == 0, r.stderr
    assert untouched(secret) and not target.is_symlink() and target.stat().st_size > 0
    as_other_user("mkdir", "-m", "777", str(shared / "theirs"))
    r = localneuron("run", flag, str(shared / "theirs" / "report"), str(script))
    assert r.returncode == 2 and f"uid {OTHER_UID}" in r.stderr and not (shared / "theirs" / "report").exists()


@ROOT_ONLY
def test_a_memory_snapshot_never_writes_through_a_planted_link(shared, secret):
    target = shared / "snapshot.pickle"
    as_other_user("ln", "-s", str(secret / "victim.txt"), str(target))
    torch.neuron.memory._dump_snapshot(str(target))
    assert untouched(secret) and "segments" in pickle.loads(target.read_bytes())


@ROOT_ONLY
def test_rank_reports_refuse_a_directory_another_user_made_first(shared, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    as_other_user("mkdir", "-m", "777", str(shared / f"localneuron-reports-{os.geteuid()}"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(OutputError, match=f"localneuron-reports-{os.geteuid()}: it belongs to uid {OTHER_UID}"):
        ranks.current_job()


@ROOT_ONLY
def test_a_rank_report_directory_planted_by_another_user_stops_the_run_at_start(tmp_path, shared, secret):
    as_other_user("ln", "-s", str(secret), str(shared / "reports"))
    script = tmp_path / "job.py"
    marker = tmp_path / "ran"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    r = localneuron("run", str(script), env={"WORLD_SIZE": "2", "RANK": "0", "LOCALNEURON_REPORT_DIR": str(shared / "reports")})
    assert r.returncode == 2 and "LOCALNEURON_REPORT_DIR" in r.stderr and not marker.exists()
    assert untouched(secret)


def test_an_output_file_must_name_a_file(tmp_path):
    with pytest.raises(OutputError, match=f"cannot write --json {tmp_path}: it is a directory"):
        OutputFile(str(tmp_path), "--json")


# --- the whole path: every component from / (a check of the last one alone let a parent symlink through) ---

@ROOT_ONLY
def test_another_users_symlink_in_a_parent_directory_is_refused_not_followed(shared, secret):
    """Through a symlink planted above the file's own directory, `estimate --json` once overwrote a root-only file."""
    as_other_user("ln", "-s", str(secret.parent), str(shared / "link"))
    through_link = shared / "link" / secret.name / "victim.txt"
    with pytest.raises(OutputError, match=f"{shared / 'link'} is a symlink owned by uid {OTHER_UID}, not by you"):
        write_output(str(through_link), "overwritten")
    assert untouched(secret)
    r = localneuron_in_process("estimate", "--hf-config", str(ESTIMATE_CONFIG), "--mode", "train", "--json",
                               str(through_link))
    assert r.returncode == 2 and f"{shared / 'link'} is a symlink owned by uid {OTHER_UID}" in r.stderr, r.stderr
    assert untouched(secret)


@ROOT_ONLY
def test_the_profiler_writes_nothing_through_another_users_parent_symlink(shared, secret):
    """The profiler once wrote its files into a root-only directory reached through such a link."""
    as_other_user("ln", "-s", str(secret.parent), str(shared / "link"))
    with pytest.raises(OutputError, match=f"{shared / 'link'} is a symlink owned by uid {OTHER_UID}"):
        NeuronProfiler(NeuronConfig(profile_output_dir=str(shared / "link" / secret.name)))
    assert untouched(secret)


@ROOT_ONLY
def test_a_directory_of_another_user_anywhere_on_the_path_is_refused(shared):
    as_other_user("mkdir", "-m", "755", str(shared / "theirs"))
    (shared / "theirs" / "mine").mkdir()  # root's own, inside a directory its owner can rename or replace
    with pytest.raises(OutputError, match=f"{shared / 'theirs'} belongs to uid {OTHER_UID}, not to you"):
        write_output(str(shared / "theirs" / "mine" / "out.json"), "{}")
    assert not (shared / "theirs" / "mine" / "out.json").exists()


def test_a_parent_others_can_write_without_the_sticky_bit_is_refused(tmp_path):
    (tmp_path / "open" / "mine").mkdir(parents=True)
    (tmp_path / "open").chmod(0o777)
    (tmp_path / "group").mkdir(mode=0o770)
    (tmp_path / "group").chmod(0o770)
    with pytest.raises(OutputError, match=f"{tmp_path / 'group'} is writable by its group without the sticky bit"):
        OutputDirectory(str(tmp_path / "group" / "mine"))
    with pytest.raises(OutputError, match=f"{tmp_path / 'open'} is writable by every user without the sticky bit "
                                          "\\(mode 0777\\)"):
        write_output(str(tmp_path / "open" / "mine" / "out.json"), "{}")
    assert not (tmp_path / "open" / "mine" / "out.json").exists()


def test_your_own_symlinks_and_dot_dot_on_the_path_are_followed_as_the_kernel_does(tmp_path, monkeypatch):
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "link").symlink_to("real/deep")
    monkeypatch.chdir(tmp_path)
    write_output("link/../out.json", "{}")  # .. of the link's target, as open() resolves it
    assert (tmp_path / "real" / "out.json").read_text() == "{}" and not (tmp_path / "out.json").exists()
    with OutputDirectory(str(tmp_path / "link" / "new" / "dirs")) as created:
        created.write("x", "1")
    assert (tmp_path / "real" / "deep" / "new" / "dirs" / "x").read_text() == "1"


@ROOT_ONLY
def test_a_parent_you_may_search_but_not_list_is_walked_through(shared):
    """Home directories are often 0711: opening each component to read it would refuse paths the kernel allows."""
    (shared / "home").mkdir(mode=0o711)
    (shared / "home").chmod(0o711)
    (shared / "home" / "user").mkdir()
    os.chown(shared / "home" / "user", OTHER_UID, OTHER_UID)
    os.setegid(OTHER_UID)
    os.seteuid(OTHER_UID)  # this process, as that user, for the write alone
    try:
        write_output(str(shared / "home" / "user" / "out.json"), "{}")
    finally:
        os.seteuid(0)
        os.setegid(0)
    written = shared / "home" / "user" / "out.json"
    assert written.read_text() == "{}" and written.stat().st_uid == OTHER_UID


@ROOT_ONLY
def test_a_private_directory_is_never_reached_through_another_users_parent_symlink(shared, secret):
    """The compile cache, its key and compile artifacts (checked_files.open_root) checked the last component and
    followed the parents: another user's link above the cache let root's cache entries land where it pointed."""
    from localneuron.runtime import checked_files

    as_other_user("ln", "-s", str(secret.parent), str(shared / "link"))
    with pytest.raises(checked_files.Untrusted, match=f"{shared / 'link'} is a symlink owned by uid {OTHER_UID}"):
        checked_files.open_root(str(shared / "link" / secret.name / "cache"), private=True)
    assert untouched(secret)


# --- what is at the name: a special file is never replaced ---

def test_a_fifo_at_the_name_is_refused_and_stays_a_fifo(tmp_path):
    """`--json` once replaced FIFOs and devices (even /dev/null, as root) with regular files."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match=f"cannot write --json {fifo}: it is a FIFO \\(named pipe\\), not a regular "
                                          "file, and localneuron never replaces one"):
        OutputFile(str(fifo), "--json")  # at the start of the run, before anything is computed
    with pytest.raises(OutputError, match="never replaces one"):
        write_output(str(fifo), "{}")
    r = localneuron_in_process("estimate", "--hf-config", str(ESTIMATE_CONFIG), "--mode", "train", "--json", str(fifo))
    assert r.returncode == 2 and "it is a FIFO" in r.stderr, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@ROOT_ONLY
def test_another_device_at_the_name_is_refused(tmp_path):
    device = tmp_path / "zero"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # a node of its own: the real /dev/zero stays out of it
    with pytest.raises(OutputError, match="it is a character device, not a regular file"):
        write_output(str(device), "{}")
    assert stat.S_ISCHR(os.lstat(device).st_mode)


@ROOT_ONLY
def test_the_null_device_takes_the_output_and_stays_the_null_device(tmp_path):
    """A null device of the test's own (the device /dev/null is, made with mknod): were the fix to regress, the
    test would replace this node, never the machine's /dev/null."""
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    assert write_output(str(null), "{}") == str(null)
    r = localneuron_in_process("estimate", "--hf-config", str(ESTIMATE_CONFIG), "--mode", "train", "--json", str(null))
    assert r.returncode == 0, r.stderr
    after = os.lstat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


@pytest.mark.parametrize("name, stream", [("-", "stdout"), ("/dev/stdout", "stdout"), ("/proc/self/fd/1", "stdout"),
                                          ("/dev/stderr", "stderr"), ("/proc/self/fd/2", "stderr")])
def test_the_standard_streams_are_written_to_not_replaced(tmp_path, name, stream):
    links = {path: os.readlink(path) for path in ("/dev/stdout", "/dev/stderr") if os.path.islink(path)}
    write = f"from localneuron.runtime.checked_files import write_output\nwrite_output({name!r}, 'written')\n"
    r = subprocess.run([sys.executable, "-c", write], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    other = "stderr" if stream == "stdout" else "stdout"
    assert getattr(r, stream).endswith("written") and "written" not in getattr(r, other)
    assert not list(tmp_path.iterdir())  # "-" is not a file in the working directory
    assert {path: os.readlink(path) for path in links} == links


def test_estimate_json_dash_is_standard_output(tmp_path):
    r = localneuron("estimate", "--hf-config", str(ESTIMATE_CONFIG), "--mode", "train", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"fits":' in r.stdout and not list(tmp_path.iterdir())


def test_run_json_dash_is_standard_output(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import torch\ntorch.ones(2, device='neuron').sum()\n")
    r = localneuron("run", "--report-to-stderr", "--json", "-", str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "visible_cores" in json.loads(r.stdout) and not (tmp_path / "-").exists()


# --- appending (the NKI Library plugin's estimates) ---

def test_append_creates_then_appends_and_never_follows_a_planted_symlink(tmp_path, secret):
    write_output(str(tmp_path / "log.jsonl"), "1\n", append=True)
    write_output(str(tmp_path / "log.jsonl"), "2\n", append=True)
    assert (tmp_path / "log.jsonl").read_text() == "1\n2\n"
    (tmp_path / "planted.jsonl").symlink_to(secret / "victim.txt")
    with pytest.raises(OutputError, match="planted.jsonl: it is a symlink; remove it"):
        write_output(str(tmp_path / "planted.jsonl"), "leak\n", append=True)
    assert untouched(secret)


def test_the_nki_library_plugin_appends_its_estimates_without_following_a_planted_symlink(tmp_path, secret,
                                                                                         monkeypatch):
    """The plugin once appended with a plain open(), which followed a symlink planted at its file's name."""
    import importlib.util
    import types

    import localneuron.nki

    plugin_file = Path(__file__).resolve().parents[2] / "localneuron" / "nki" / "library_shim" / "nki_library_plugin.py"
    spec = importlib.util.spec_from_file_location("nki_library_plugin_under_test", plugin_file)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if type(f).__module__ != plugin.__name__])
    calls = [{"name": "k", "target": "trn2", "estimated_ns": 5, "bottleneck": "pe"}]
    monkeypatch.setattr(localneuron.nki, "kernel_calls", lambda: calls)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.chdir(tmp_path)
    item, call = types.SimpleNamespace(nodeid="test_k"), types.SimpleNamespace(when="call", duration=0.5)
    plugin.pytest_runtest_makereport(item, call)
    assert json.loads((tmp_path / f"main-{plugin.ESTIMATES_FILE}").read_text())["kernels"] == calls
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    (tmp_path / f"gw0-{plugin.ESTIMATES_FILE}").symlink_to(secret / "victim.txt")
    with pytest.raises(OutputError, match="it is a symlink"):
        plugin.pytest_runtest_makereport(item, call)
    assert untouched(secret)
