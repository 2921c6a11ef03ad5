"""Which files of a directory a code snapshot packs (`launcher run --code DIR`, `code:` in the
spec), what is refused, and the packed Snapshot (launcher.pod.code_archive packs the files into
the archive a backend's submit(code=) receives; each rank's entrypoint unpacks it).

- A git checkout packs git's tracked and untracked-but-not-ignored files
  (`git ls-files -co --exclude-standard`); another directory packs what the spec's
  `include` globs match (every file without them). `exclude` globs apply to both.
- Never packed: .git/, __pycache__/, a virtualenv (a directory holding pyvenv.cfg), a file
  over 50 MB (each is named in the snapshot's notes).
- Refused, naming the file: one holding a value of a secret the run gets, or one that looks
  like a credentials file (a private key, .env, .netrc, an AWS credentials file);
  `--allow-file PATH` lets one such file through.
- A snapshot packing past the backend's limit is refused before anything is submitted,
  with its size, its largest files and the `exclude` to add.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path, PurePosixPath

from launcher.errors import FieldError, InputError
from launcher.pod.code_archive import DEFAULT_LIMIT, Snapshot, digest_of, pack
from launcher.secrets.mask import too_short_to_mask

MAX_FILE_BYTES = 50 * 1000 * 1000
NEVER_DIRS = {".git", "__pycache__"}
CREDENTIAL_NAMES = {".env", ".netrc", "_netrc"}
# A whole PEM block, as a key file holds it: the header alone is also in code that writes keys.
PRIVATE_KEY = re.compile(
    rb"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----\r?\n[A-Za-z0-9+/=\r\n:,\- ]{16,}?"
    rb"-----END \1PRIVATE KEY-----"
)
AWS_CREDENTIALS = re.compile(rb"^\s*aws_secret_access_key\s*=", re.MULTILINE)


def _git_files(root: Path) -> list[str] | None:
    """git's tracked and untracked-but-not-ignored files under `root`, or None outside a checkout."""
    try:
        inside = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return None
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z", "--", "."],
        capture_output=True,
        timeout=300,
    )
    if listed.returncode != 0:
        raise InputError(
            f"cannot list the files of the git checkout {root}: {listed.stderr.decode(errors='replace').strip()}"
        )
    return [p for p in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _walk(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in NEVER_DIRS and not (Path(dirpath, d) / "pyvenv.cfg").exists()
        )
        for name in filenames:
            out.append(Path(dirpath, name).relative_to(root).as_posix())
    return out


def _matches(rel: str, patterns: list[str]) -> bool:
    """A glob matches the path, its name, or a directory above it (`data/`, `*.ckpt`, `docs/**`)."""
    parts = PurePosixPath(rel).parts
    for pattern in patterns:
        pat = pattern.rstrip("/")
        if fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(parts[-1], pat):
            return True
        if any(
            fnmatch.fnmatch("/".join(parts[:i]), pat) or fnmatch.fnmatch(parts[i - 1], pat)
            for i in range(1, len(parts))
        ):
            return True
    return False


def _venv_dirs(root: Path, files: list[str]) -> set[str]:
    dirs = {str(PurePosixPath(rel).parent) for rel in files if PurePosixPath(rel).name == "pyvenv.cfg"}
    return {d for d in dirs if (root / d / "pyvenv.cfg").is_file()}


def _credential_reason(rel: str, head: bytes) -> str | None:
    name = PurePosixPath(rel).name
    if name in CREDENTIAL_NAMES or name.startswith(".env."):
        return f"looks like a credentials file ({name})"
    if PRIVATE_KEY.search(head):
        return "holds a private key"
    if name == "credentials" and AWS_CREDENTIALS.search(head):
        return "looks like an AWS credentials file"
    return None


def _secret_values(secrets) -> list[tuple[str, bytes]]:
    out = []
    for s in secrets or ():
        for value in s.masked_values():
            value = value.strip()
            if value and not too_short_to_mask(value):
                out.append((s.name, value.encode()))
    return out


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def select(root: Path, include: list[str], exclude: list[str]) -> tuple[list[str], list[str]]:
    """The files of `root` a snapshot packs (relative, '/'-separated) and notes on what was left out."""
    listed = _git_files(root)
    files = listed if listed is not None else _walk(root)
    if listed is None and include:
        files = [f for f in files if _matches(f, include)]
    notes: list[str] = []
    venvs = _venv_dirs(root, files)
    if venvs:
        notes.append(f"not packed: the virtualenv(s) {', '.join(sorted(venvs))}")
    kept = []
    for rel in files:
        parts = PurePosixPath(rel).parts
        if any(p in NEVER_DIRS for p in parts[:-1]):
            continue
        if any(rel.startswith(v + "/") for v in venvs if v != "."):
            continue
        if exclude and _matches(rel, exclude):
            continue
        kept.append(rel)
    return kept, notes


def build(
    code,
    *,
    secrets=None,
    allow_files: tuple[str, ...] = (),
    limit: int = DEFAULT_LIMIT,
    where: str = "the run",
    base: Path | None = None,
) -> Snapshot:
    """Pack the spec's `code` (a launcher.spec.models.Code) for a run that gets `secrets`.
    InputError (exit 2) for a refused file or a snapshot past `limit`, before anything is submitted."""
    root = (base or Path.cwd()) / Path(code.path).expanduser()
    if not root.is_dir():
        raise FieldError("code.path", f"{root} is not a directory")
    root = root.resolve()
    allowed = {(Path.cwd() / a).resolve() for a in allow_files}
    files, notes = select(root, code.include, code.exclude)
    values = _secret_values(secrets)
    packed, sizes = [], []
    for rel in files:
        path = root / rel
        if path.is_symlink():
            packed.append(rel)
            continue
        if not path.is_file():
            continue  # listed by git but deleted from the tree
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            notes.append(f"not packed: {rel} ({_human(size)}, over {MAX_FILE_BYTES // 1000_000} MB)")
            continue
        if path.resolve() not in allowed:
            data = path.read_bytes()
            reason = _credential_reason(rel, data[: 1 << 20])
            if reason is None:
                named = [name for name, value in values if value in data]
                if named:
                    reason = f"holds the value of the secret {named[0]}"
            if reason:
                raise InputError(
                    f"code: {root / rel} {reason}; a code snapshot never packs a secret",
                    hint=f"add it to code.exclude, or pass --allow-file {root / rel} if it is no secret",
                )
        packed.append(rel)
        sizes.append((size, rel))
    data = pack(root, packed)
    if len(data) > limit:
        largest = sorted(sizes, reverse=True)[:5]
        top = ", ".join(f"{rel} ({_human(size)})" for size, rel in largest)
        first = PurePosixPath(largest[0][1]).parts[0] if largest else "PATH"
        raise InputError(
            f"code: {root} packs to {_human(len(data))}, over the {_human(limit)} {where} takes; "
            f"the largest files: {top}",
            hint=f"leave them out with code.exclude, e.g. `exclude: [{first}]`",
        )
    return Snapshot(data, digest_of(data), str(root), len(packed), sum(s for s, _ in sizes), tuple(notes))
