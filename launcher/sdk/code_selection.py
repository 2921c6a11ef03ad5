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
IGNORE_FILE = ".launcherignore"
# Files that are credentials by their name alone, and what each is.
CREDENTIAL_NAMES = {
    ".env": "an env file",
    ".envrc": "a direnv .envrc",
    ".netrc": "a .netrc",
    "_netrc": "a .netrc",
    ".git-credentials": "a .git-credentials store",
    ".pypirc": "a .pypirc (package index credentials)",
    ".npmrc": "an .npmrc (registry tokens)",
    ".pgpass": "a .pgpass (database passwords)",
    ".boto": "a .boto (cloud credentials)",
    ".htpasswd": "an .htpasswd (password hashes)",
    "terraform.tfstate": "a terraform.tfstate (it holds every secret terraform manages)",
    "terraform.tfstate.backup": "a terraform.tfstate backup (it holds every secret terraform manages)",
    "secrets.json": "a secrets.json",
    "application_default_credentials.json": "Google application-default credentials",
    "id_rsa": "an SSH private key",
    "id_dsa": "an SSH private key",
    "id_ecdsa": "an SSH private key",
    "id_ed25519": "an SSH private key",
}
# Files that are credentials by the directory they sit in as well: (parent, name) -> what.
CREDENTIAL_PATHS = {
    (".kube", "config"): "a kubeconfig",
    (".docker", "config.json"): "a docker config (registry credentials)",
    (".aws", "credentials"): "an AWS credentials file",
    (".azure", "accessTokens.json"): "Azure access tokens",
    (".config/gcloud", "credentials.db"): "gcloud's credentials",
    (".config/gcloud", "access_tokens.db"): "gcloud's access tokens",
}
CREDENTIAL_SUFFIXES = {
    ".env": "an env file",
    ".ppk": "a PuTTY private key",
    ".tfstate": "a terraform state file (it holds every secret terraform manages)",
    ".p12": "a PKCS#12 key store",
    ".pfx": "a PKCS#12 key store",
    ".jks": "a Java key store",
    ".keystore": "a key store",
}
# A whole PEM block, as a key file holds it (the header alone is also in code that writes
# keys), with its newlines as they are or escaped (\n: a GCP key's private_key in JSON).
_NL = rb"(?:\r?\n|(?:\\r)?\\n)"
PRIVATE_KEY = re.compile(
    rb"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----" + _NL + rb"[A-Za-z0-9+/=\r\n\\:,\- ]{16,}?-----END \1PRIVATE KEY-----"
)
PUTTY_KEY = re.compile(rb"^PuTTY-User-Key-File-\d+:", re.MULTILINE)
# An AWS credentials file's key line, written with = or : as botocore reads both; in a
# file named credentials any value counts, elsewhere one that looks like a key (not code).
AWS_CREDENTIALS = re.compile(rb"^[ \t]*aws_secret_access_key[ \t]*[=:]", re.MULTILINE)
AWS_KEY_LINE = re.compile(
    rb"^[ \t]*aws_secret_access_key[ \t]*[=:][ \t]*[\"']?[A-Za-z0-9/+=]{20,}[\"']?[ \t]*\r?$", re.M
)
KUBECONFIG = re.compile(rb"^kind:[ \t]*Config[ \t]*\r?$", re.MULTILINE)
KUBECONFIG_CREDENTIALS = re.compile(rb"^[ \t]*(?:client-key-data|token|password|client-key)[ \t]*:", re.MULTILINE)
DOCKER_AUTH = re.compile(rb'"auths"[ \t\r\n]*:[ \t\r\n]*\{.*"auth"[ \t\r\n]*:', re.DOTALL)
GOOGLE_CREDENTIALS = re.compile(rb'"type"[ \t\r\n]*:[ \t\r\n]*"(service_account|authorized_user|external_account)"')


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
    """Why the file at `rel` (its first bytes `head`) is a credential, or None: by its name,
    the directory it sits in, or what it holds (a private key in any encoding, a cloud
    provider's credentials file, a kubeconfig with credentials, a docker config)."""
    path = PurePosixPath(rel)
    name, parent = path.name, path.parent.as_posix()
    what = CREDENTIAL_NAMES.get(name) or next(
        (w for (d, n), w in CREDENTIAL_PATHS.items() if n == name and (parent == d or parent.endswith("/" + d))),
        None,
    )
    if what is None and name.startswith(".env."):
        what = "an env file"
    if what is None:
        what = next((w for suffix, w in CREDENTIAL_SUFFIXES.items() if name.endswith(suffix) and name != suffix), None)
    if what is not None:
        return f"is {what} ({name}), a credentials file by its name"
    if PUTTY_KEY.search(head):
        return "holds a PuTTY private key"
    if PRIVATE_KEY.search(head):
        google = GOOGLE_CREDENTIALS.search(head)
        return "holds a private key" + (" (a GCP service-account key)" if google else "")
    if GOOGLE_CREDENTIALS.search(head) and (b'"refresh_token"' in head or b'"private_key"' in head):
        return "looks like a Google credentials file"
    if AWS_KEY_LINE.search(head) or (name == "credentials" and AWS_CREDENTIALS.search(head)):
        return "looks like an AWS credentials file (aws_secret_access_key)"
    if KUBECONFIG.search(head) and KUBECONFIG_CREDENTIALS.search(head):
        return "looks like a kubeconfig with credentials"
    if DOCKER_AUTH.search(head):
        return "looks like a docker config with registry credentials"
    return None


def _secret_values(secrets) -> list[tuple[str, bytes]]:
    out = []
    for s in secrets or ():
        for value in s.masked_values():
            value = value.strip()
            if value and not too_short_to_mask(value):
                out.append((s.name, value.encode()))
    return out


def human_size(n: int) -> str:
    size: float = n
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"


def _ignored_by_launcherignore(root: Path, files: list[str]) -> set[str]:
    """The files a .launcherignore leaves out, read as git reads a .gitignore: one at the
    root or in any directory, its patterns relative to that directory; it applies to files
    git tracks as well."""
    import pathspec

    ignored: set[str] = set()
    ignore_files = sorted((rel for rel in files if PurePosixPath(rel).name == IGNORE_FILE), key=len)
    for ignore_rel in ignore_files:
        base = PurePosixPath(ignore_rel).parent.as_posix()
        try:
            lines = (root / ignore_rel).read_text(errors="replace").splitlines()
        except OSError:
            continue
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        prefix = "" if base == "." else base + "/"
        for rel in files:
            if rel.startswith(prefix) and spec.match_file(rel[len(prefix) :]):
                ignored.add(rel)
    return ignored


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
    if listed is None and (root / IGNORE_FILE).is_file() and IGNORE_FILE not in files:
        files.append(IGNORE_FILE)  # include globs do not leave out what says what to leave out
    ignored = _ignored_by_launcherignore(root, files)
    kept = []
    for rel in files:
        parts = PurePosixPath(rel).parts
        if any(p in NEVER_DIRS for p in parts[:-1]):
            continue
        if any(rel.startswith(v + "/") for v in venvs if v != "."):
            continue
        if rel in ignored or (exclude and _matches(rel, exclude)):
            continue
        kept.append(rel)
    return kept, notes


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def build(
    code,
    *,
    secrets=None,
    stored=None,
    home: Path | None = None,
    allow_files: tuple[str, ...] = (),
    limit: int = DEFAULT_LIMIT,
    where: str = "the run",
    base: Path | None = None,
) -> Snapshot:
    """Pack the spec's `code` (a launcher.spec.models.Code) for a run that gets `secrets`;
    `stored` are every secret of the store (no file may hold a value of any of them), `home`
    the launcher home (none of its files is ever packed). InputError (exit 2) for refused
    files (each named, with why) or a snapshot past `limit`, before anything is submitted."""
    root = (base or Path.cwd()) / Path(code.path).expanduser()
    if not root.is_dir():
        raise FieldError("code.path", f"{root} is not a directory")
    root = root.resolve()
    home = home.resolve() if home is not None else None
    allowed = {(Path.cwd() / a).resolve() for a in allow_files}
    files, notes = select(root, code.include, code.exclude)
    values = _secret_values([*(secrets or ()), *(stored or ())])
    packed, sizes = [], []
    refusals: list[tuple[Path, str]] = []
    for rel in files:
        path = root / rel
        if home is not None and _inside(path.resolve() if not path.is_symlink() else path, home):
            refusals.append((path, f"lies in the launcher home {home}, which holds every secret and run"))
            continue
        if path.is_symlink():
            packed.append(rel)
            continue
        if not path.is_file():
            continue  # listed by git but deleted from the tree
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            notes.append(f"not packed: {rel} ({human_size(size)}, over {MAX_FILE_BYTES // 1000_000} MB)")
            continue
        if path.resolve() not in allowed:
            data = path.read_bytes()
            reason = _credential_reason(rel, data[: 1 << 20])
            if reason is None:
                named = [name for name, value in values if value in data]
                if named:
                    reason = f"holds the value of the secret {named[0]}"
            if reason:
                refusals.append((path, reason))
                continue
        packed.append(rel)
        sizes.append((size, rel))
    if refusals:
        _refuse(root, refusals, home)
    data = pack(root, packed)
    largest = sorted(sizes, key=lambda sr: (-sr[0], sr[1]))[:5]
    if len(data) > limit:
        top = ", ".join(f"{rel} ({human_size(size)})" for size, rel in largest)
        first = PurePosixPath(largest[0][1]).parts[0] if largest else "PATH"
        raise InputError(
            f"code: {root} packs to {human_size(len(data))}, over the {human_size(limit)} {where} takes; "
            f"the largest files: {top}",
            hint=f"leave them out with code.exclude, e.g. `exclude: [{first}]`",
        )
    unpacked = sum(s for s, _ in sizes)
    shipped = f"ships {len(packed)} files, {human_size(unpacked)} ({human_size(len(data))} packed) from {root}"
    if largest:
        shipped += "; largest: " + ", ".join(f"{rel} ({human_size(size)})" for size, rel in largest[:3])
    listing = tuple(sorted((rel, size) for size, rel in sizes))
    return Snapshot(data, digest_of(data), str(root), len(packed), unpacked, (shipped, *notes), listing=listing)


SHOWN_REFUSALS = 10


def _refuse(root: Path, refusals: list[tuple[Path, str]], home: Path | None) -> None:
    """One InputError naming every refused file (the first SHOWN_REFUSALS of them) and why."""
    said = [f"{path} {why}" for path, why in refusals]
    first, rest = said[0], said[1:]
    message = f"code: {first}; a code snapshot never packs a secret"
    if rest:
        message += f", and {len(rest)} more file(s) are refused:" + "".join(
            f"\n  {r}" for r in rest[: SHOWN_REFUSALS - 1]
        )
        if len(rest) >= SHOWN_REFUSALS:
            message += f"\n  ... and {len(rest) - SHOWN_REFUSALS + 1} more"
    hint = f"leave such files out with a {IGNORE_FILE} in {root} (read as a .gitignore) or code.exclude"
    home_refused = [path for path, why in refusals if why.startswith("lies in the launcher home")]
    if home_refused and home is not None and _inside(home, root):
        hint += f"; for the launcher home add `/{home.relative_to(root).as_posix()}/` to {root / IGNORE_FILE}"
    if len(home_refused) < len(refusals):
        shown = next(path for path, why in refusals if path not in home_refused)
        hint += f"; --allow-file {shown} packs a file that is no secret"
    raise InputError(message, hint=hint)
