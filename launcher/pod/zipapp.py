"""The entrypoint as a zipapp (PEP 441), for the `zipapp` entrypoint mode: the run's
ConfigMap carries it, and a pod runs it with the image's own python3 (3.8 or newer),
isolated and without site-packages (`python3 -I -S entrypoint.pyz`), so that an image
needs nothing of ours: no runtime image to pull, nothing installed.

It holds the modules of the entrypoint that need the standard library only:
launcher.entrypoint (less bundle, which assembles the injected runtime on the host),
launcher.pod (less zipapp, this builder) and the masker (launcher.secrets.mask and
kinds). Nothing in it imports pydantic or PyYAML: the plan (launcher.pod.plan) is JSON,
and parameters.yaml comes rendered. The archive is built from the installed package's
source files, not from imports, and deterministically (fixed order and timestamps), so
one launcher version always renders the same bytes. Its __main__.py first imports every
standard library module those sources import (`required_modules`), so that an
incomplete standard library (Debian's python3-minimal) is exit 67 naming the image.
"""

from __future__ import annotations

import ast
import functools
import io
import zipfile
from pathlib import Path

from launcher.pod import contract
from launcher.pod.plan import ZIPAPP_FILE

PACKAGE = Path(__file__).resolve().parents[1]  # the launcher package
SECRETS_MODULES = ("__init__.py", "kinds.py", "mask.py")  # the masker; store.py is the host's
# The zipapp's __main__.py checks, before anything of ours is imported, that every standard
# library module the entrypoint imports (at once or later: a log archive's upload at the end)
# imports in this interpreter: Debian's python3-minimal, for one, has no shutil, json or ctypes.
# A missing one is a setup failure naming the image (exit 67, not the user's exit 1, which would
# be retried), not a traceback. Only builtins here: nothing else is known to import. %-style
# fields, as the shim's.
_MAIN_TEMPLATE = """\
import sys

missing = []
for name in %(modules)r:
    try:
        __import__(name)
    except ImportError as e:
        if (e.name or name) not in missing:  # xml, not xml.etree.ElementTree
            missing.append(e.name or name)
if missing:
    import os

    msg = (
        "image %%s: its %%s (Python %%s) lacks the standard library module%%s %%s that the launcher's "
        "entrypoint needs (Debian's python3-minimal, for one, has only part of the standard library): install the "
        "full python3 in the image, set entrypoint_mode: inject in the cluster profile (an init container "
        "brings a complete Python), or entrypoint_mode: image for an image with the launcher installed"
        %% (
            os.environ.get(%(image)r) or "of this run",
            sys.executable,
            sys.version.split()[0],
            "s" if len(missing) > 1 else "",
            ", ".join(missing),
        )
    )
    print("[launcher] error: " + msg, flush=True)
    if os.path.exists("/dev/termination-log"):
        try:
            with open("/dev/termination-log", "w") as f:
                f.write(msg + "\\n")
        except OSError:
            pass
    sys.exit(%(code)d)
from launcher.entrypoint.main import main

sys.exit(main())
"""
# The zip format's earliest date: every entry gets it, so the bytes depend on the sources only.
EPOCH = (1980, 1, 1, 0, 0, 0)
MIN_PYTHON = (3, 8)

# The pod's command: POSIX sh finds the image's python3 (then python), checks its version,
# and runs the zipapp in $LAUNCHER_CONFIG_DIR (the ConfigMap's mount) with it; with none,
# the pod fails at once naming the image and the other modes. No "$(" in it: the kubelet
# expands $(VAR) in a container's command. %-style fields: the shell text is full of the braces
# that str.format would need doubled.
_SHIM_TEMPLATE = """\
for python in python3 python; do
  command -v "$python" >/dev/null 2>&1 || continue
  if "$python" -c 'import sys; sys.exit(sys.version_info < (%(major)d, %(minor)d))' >/dev/null 2>&1; then
    exec "$python" -I -S "$%(config_dir)s/%(zipapp)s"
  fi
  where=`command -v "$python"`
  version=`"$python" -V 2>&1`
  found="$found $where ($version)"
done
msg="image ${%(image)s:-of this run} has no python3 or python %(major)d.%(minor)d or newer on its PATH ($PATH)${found:+; found:$found}: \
set entrypoint_mode: inject in the cluster profile for an image without Python (an init container brings one), \
or entrypoint_mode: image for an image with the launcher installed"
echo "[launcher] error: $msg"
if [ -e /dev/termination-log ]; then echo "$msg" > /dev/termination-log; fi
exit %(code)d
"""
SHIM = _SHIM_TEMPLATE % {
    "major": MIN_PYTHON[0],
    "minor": MIN_PYTHON[1],
    "image": contract.IMAGE,
    "code": contract.EXIT_SETUP,
    "config_dir": contract.CONFIG_DIR,
    "zipapp": ZIPAPP_FILE,
}


COMMAND = ["/bin/sh", "-c", SHIM]


def _imported(tree: ast.Module) -> set[str]:
    """The modules a module imports, by full name, less those imported inside a `try` that
    catches ImportError (optional ones: ahocorasick_rs, resource) and relative imports."""
    optional: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            optional |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in ("ImportError", "ModuleNotFoundError") for k in kinds)


def required_modules() -> list[str]:
    """Every module outside the launcher package that the zipapp's sources import, sorted:
    what its __main__.py checks first."""
    names: set[str] = set()
    for _name, data in sources():
        names |= _imported(ast.parse(data))
    return sorted(n for n in names if n.split(".")[0] not in ("launcher", "__future__"))


def main_source() -> str:
    """The zipapp's __main__.py."""
    return _MAIN_TEMPLATE % {
        "modules": tuple(required_modules()),
        "image": contract.IMAGE,
        "code": contract.EXIT_SETUP,
    }


def _modules(sub: str) -> list[str]:
    return sorted(p.name for p in (PACKAGE / sub).glob("*.py"))


def sources() -> list[tuple[str, bytes]]:
    """(name in the archive, contents) of every module the zipapp holds, in order."""
    picked = {
        "entrypoint": [n for n in _modules("entrypoint") if n != "bundle.py"],
        "pod": [n for n in _modules("pod") if n != "zipapp.py"],  # this module builds it, on the host
        "secrets": list(SECRETS_MODULES),
    }
    files = [("launcher/__init__.py", (PACKAGE / "__init__.py").read_bytes())]
    for sub, names in picked.items():
        files += [(f"launcher/{sub}/{n}", (PACKAGE / sub / n).read_bytes()) for n in names]
    return files


@functools.lru_cache(maxsize=1)
def build() -> bytes:
    """The zipapp's bytes (a ZIP with __main__.py at its root)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [("__main__.py", main_source().encode()), *sources()]:
            info = zipfile.ZipInfo(name, EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data, compresslevel=9)  # it travels in the run's ConfigMap
    return buf.getvalue()


def write(path: Path) -> Path:
    """Write the zipapp to `path` (atomically) and return it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(build())
    tmp.replace(path)
    return path
