"""The entrypoint as a zipapp (PEP 441), for the `zipapp` entrypoint mode: the run's
ConfigMap carries it, and a pod runs it with the image's own python3 (3.8 or newer),
isolated and without site-packages (`python3 -I -S entrypoint.pyz`), so that an image
needs nothing of ours: no runtime image to pull, nothing installed.

It holds the modules of the entrypoint that need the standard library only:
launcher.entrypoint (less bundle, which assembles the injected runtime on the host),
launcher.pod and the masker (launcher.secrets.mask and kinds). Nothing in it imports
pydantic or PyYAML: the plan (launcher.pod.plan) is JSON, and parameters.yaml comes
rendered. The archive is built from the installed package's source files, not from
imports, and deterministically (fixed order and timestamps), so one launcher version
always renders the same bytes.
"""

from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path

from launcher.pod import contract
from launcher.pod.plan import ZIPAPP_FILE

PACKAGE = Path(__file__).resolve().parents[1]  # the launcher package
SECRETS_MODULES = ("__init__.py", "kinds.py", "mask.py")  # the masker; store.py is the host's
MAIN = "import sys\nfrom launcher.entrypoint.main import main\nsys.exit(main())\n"
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


def _modules(sub: str) -> list[str]:
    return sorted(p.name for p in (PACKAGE / sub).glob("*.py"))


def sources() -> list[tuple[str, bytes]]:
    """(name in the archive, contents) of every module the zipapp holds, in order."""
    picked = {
        "entrypoint": [n for n in _modules("entrypoint") if n != "bundle.py"],
        "pod": _modules("pod"),
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
        for name, data in [("__main__.py", MAIN.encode()), *sources()]:
            info = zipfile.ZipInfo(name, EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return buf.getvalue()


def write(path: Path) -> Path:
    """Write the zipapp to `path` (atomically) and return it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(build())
    tmp.replace(path)
    return path
