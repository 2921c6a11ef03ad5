"""A PEP 517 build backend with no dependencies, so that `pip install --no-index .`
of the test package works offline: it packs tinypkg/ into a pure-Python wheel."""

import base64
import hashlib
import os
import zipfile

NAME, VERSION = "tinypkg", "0.1.0"
DIST = f"{NAME}-{VERSION}"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for root, _, names in os.walk(NAME):
        for n in names:
            if n.endswith(".py"):
                p = os.path.join(root, n)
                with open(p, "rb") as f:
                    files[p.replace(os.sep, "/")] = f.read()
    files[f"{DIST}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode()
    files[f"{DIST}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tinybackend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [_record_line(p, d) for p, d in files.items()] + [f"{DIST}.dist-info/RECORD,,"]
    files[f"{DIST}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{DIST}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
    return name
