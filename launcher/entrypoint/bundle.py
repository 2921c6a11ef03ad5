"""Assemble the runtime that inject mode copies into every pod, and copy it there.

    python -m launcher.entrypoint.bundle build --python PYTHON_HOME --out DIR
    python -m launcher.entrypoint.bundle install TARGET

`build` is the one recipe for the runtime: images/runtime/Dockerfile runs it with a
python-build-standalone `install_only` tree as PYTHON_HOME, and the tests run it with a
virtualenv of the current interpreter in its place. It makes

    DIR/runtime/python/       a copy of PYTHON_HOME, plus the launcher package and the few
                              distributions the entrypoint imports (pydantic, PyYAML and what
                              they require), copied from the environment running `build`
    DIR/runtime/VERSION       the launcher version
    DIR/bin/launcher-runtime-install   the init container's command (on the image's PATH):
                              copies DIR/runtime into the pod's volume, e.g. /launcher

and then checks, in a clean environment, that the assembled interpreter imports the
entrypoint isolated (-I) and nothing heavy with it. `install` is what that command runs.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import launcher

# What the entrypoint imports beyond the standard library (spec models, YAML, the log
# masker's one-pass search).
REQUIREMENTS = ("pydantic", "PyYAML", "ahocorasick-rs")
# Must not load with the entrypoint: it runs in every pod of every image.
HEAVY = ("torch", "composer", "transformers", "kubernetes", "databricks", "numpy", "streaming", "rich", "click")
PROBE = (
    "import json, sys, launcher.entrypoint.main, launcher.entrypoint.integrations;"
    "print(json.dumps({'prefix': sys.prefix, 'flags': sys.flags.isolated, 'modules': sorted(sys.modules)}))"
)


def _dist_closure(names: tuple[str, ...]) -> list[metadata.Distribution]:
    """The installed distributions `names` need, found by their Requires-Dist (extras skipped)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        dist = metadata.distribution(name)
        seen[key] = dist
        for req in dist.requires or []:
            spec, _, marker = req.partition(";")
            if "extra" in marker:
                continue
            todo.append(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec.strip()).group(0))
    return sorted(seen.values(), key=lambda d: d.metadata["Name"].lower())


def _purelib(python: Path) -> Path:
    done = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        env={},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def _copy_dist(dist: metadata.Distribution, purelib: Path) -> int:
    root = Path(dist.locate_file("")).resolve()
    copied = 0
    for f in dist.files or []:
        rel = Path(str(f))
        if ".." in rel.parts or rel.suffix == ".pyc":
            continue  # console scripts and caches live outside site-packages
        src = root / rel
        if src.is_file():
            dst = purelib / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            copied += 1
    return copied


def build(python_home: Path, out: Path) -> dict:
    """Assemble DIR (see the module doc); return what the check saw."""
    runtime = out / "runtime"
    if runtime.exists():
        shutil.rmtree(runtime)
    (out / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copytree(python_home, runtime / "python", symlinks=True)
    python = runtime / "python" / "bin" / "python3"
    purelib = _purelib(python)
    purelib.mkdir(parents=True, exist_ok=True)
    for dist in _dist_closure(REQUIREMENTS):
        _copy_dist(dist, purelib)
    package = Path(launcher.__file__).resolve().parent
    shutil.copytree(
        package, purelib / "launcher", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True
    )
    (runtime / "VERSION").write_text(launcher.__version__ + "\n")
    install = out / "bin" / "launcher-runtime-install"
    # A shebang, not a shell: the runtime image needs no /bin/sh for its one command.
    install.write_text(
        f"#!{python} -I\nfrom launcher.entrypoint.bundle import main\nmain(['install', *__import__('sys').argv[1:]])\n"
    )
    install.chmod(0o755)
    return check(python)


def check(python: Path) -> dict:
    """Import the entrypoint with the assembled interpreter, isolated, in an empty environment."""
    done = subprocess.run([str(python), "-I", "-c", PROBE], env={}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the assembled runtime cannot import the entrypoint:\n{done.stderr.strip()}")
    seen = json.loads(done.stdout)
    heavy = sorted({m.split(".")[0] for m in seen["modules"]} & set(HEAVY))
    if heavy:
        raise SystemExit(f"the entrypoint imports {', '.join(heavy)}: too heavy for the injected runtime")
    return seen


def install(target: Path) -> None:
    """Copy the runtime next to this program's bin/ into `target` (the pod's volume)."""
    runtime = Path(__file__).resolve().parents[0]
    # .../runtime/python/lib/pythonX.Y/site-packages/launcher/entrypoint/bundle.py -> .../runtime
    while runtime.name != "runtime" and runtime != runtime.parent:
        runtime = runtime.parent
    if not (runtime / "VERSION").exists():
        raise SystemExit(f"launcher-runtime-install: no assembled runtime around {__file__}")
    target.mkdir(parents=True, exist_ok=True)
    # The runtime's children, not the directory: copytree would end with copystat on target, the
    # kubelet's emptyDir (root's, mode 0777), which a pod running as another user may fill but
    # not chmod or utime (EPERM after every file was copied).
    for child in sorted(runtime.iterdir()):
        dest = target / child.name
        if child.is_dir() and not child.is_symlink():
            shutil.copytree(child, dest, symlinks=True, dirs_exist_ok=True)
        else:
            if dest.is_symlink():  # an init container's earlier try: copy2 makes no symlink over one
                dest.unlink()
            shutil.copy2(child, dest, follow_symlinks=False)
    print(f"[launcher] runtime {(runtime / 'VERSION').read_text().strip()} copied into {target}", flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m launcher.entrypoint.bundle")
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build", help="assemble the runtime")
    b.add_argument("--python", required=True, type=Path, help="a relocatable Python home (python-build-standalone)")
    b.add_argument("--out", required=True, type=Path)
    i = sub.add_parser("install", help="copy the runtime into a volume")
    i.add_argument("target", type=Path)
    args = p.parse_args(argv)
    if args.what == "build":
        seen = build(args.python.resolve(), args.out.resolve())
        print(f"runtime assembled in {args.out}: the entrypoint imports {len(seen['modules'])} modules")
    else:
        install(args.target)


if __name__ == "__main__":
    sys.exit(main())
