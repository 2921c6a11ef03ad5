"""The injected runtime and a stand-in for a user's image, for the tests that need them
(tests/entrypoint/test_runtime.py, and the fake cluster's image map in tests/kubernetes).

build_runtime assembles the runtime exactly as images/runtime/Dockerfile does
(`python -m launcher.entrypoint.bundle build`), with a virtualenv of this interpreter in
place of python-build-standalone. make_image makes a directory whose bin/ stands for an
image: bash, git and the image's own python3 (an environment without the launcher)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

RUNTIME_IMAGE_GLOB = "ghcr.io/launcher-dev/launcher-runtime:*"


@dataclass
class Runtime:
    out: Path  # what the runtime image holds: bin/launcher-runtime-install and runtime/
    volume: Path  # a pod's /launcher after the init container ran (test_runtime)


def build_runtime(base: Path, python: str = sys.executable) -> Runtime:
    """The runtime, its Python a virtualenv of `python` (one of the same minor version as this
    interpreter: the libraries it gets are this environment's)."""
    home = base / "python-home"
    subprocess.run([python, "-m", "venv", "--without-pip", str(home)], check=True)
    out = base / "image"
    done = subprocess.run(
        [sys.executable, "-m", "launcher.entrypoint.bundle", "build", "--python", str(home), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "runtime assembled" in done.stdout
    volume = base / "pod" / "launcher"
    # The init container's command, in an environment as bare as the runtime image's.
    done = subprocess.run(
        ["/usr/bin/env", "-i", f"PATH={out / 'bin'}", "launcher-runtime-install", str(volume)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return Runtime(out, volume)


def wheel(path: Path, module: str = "tinypkg", text: str = "HELLO = 'from the cloned repo'\n") -> None:
    """A one-module wheel, so pip_install installs it with no index and no build backend."""
    files = {
        f"{module}.py": text.encode(),
        f"{module}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n".encode(),
        f"{module}-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{module}-0.1.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr(f"{module}-0.1.dist-info/RECORD", "\n".join(record) + "\n")


def make_image(root: Path, *, with_bash: bool = True, tools: tuple[str, ...] = ()) -> Path:
    """A directory standing in for the user's image: its bin/ is the whole PATH."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    venv = root / "venv"
    # The image's Python: pip and setuptools of the base interpreter, and no launcher.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexport IMAGE_PYTHON_SHIM=1\nexec {venv}/bin/python3 "$@"\n')
    shim.chmod(0o755)
    (bin_dir / "git").symlink_to("/usr/bin/git")
    if with_bash:
        (bin_dir / "bash").symlink_to("/bin/bash")
    for tool in tools:
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    return bin_dir
