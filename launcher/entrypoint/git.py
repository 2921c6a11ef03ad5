"""The git_repo integration: clone a repository and check out what the spec asks.

- Where from: `org/repo` on `host` (https://host/org/repo.git, or git@host:org/repo.git
  with ssh_clone), a full URL (https, http, ssh, git, file) or a local path.
- What: git_commit wins over git_branch (a branch or a tag); else the default branch.
- Every value reaches git as its own argument (`--branch=NAME`, `--` before the URL
  and the path): a branch named `x; rm -rf ~` is just an odd branch name.
- Credentials: ssh uses GIT_SSH_COMMAND (set by a git-ssh secret). https sends a
  token secret as an `Authorization` header configured for that host only, through
  GIT_CONFIG_COUNT/KEY/VALUE environment variables: never in argv, the URL, the
  log or .git/config. Needs git >= 2.31.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from launcher.entrypoint import log as out
from launcher.entrypoint.steps import StepFailed, run_step
from launcher.secrets.mask import Masker

SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@(?P<host>[A-Za-z0-9.-]+):(?!//)")
DEFAULT_SSH_COMMAND = "ssh -o StrictHostKeyChecking=no"
FULL_HASH_LENGTHS = (40, 64)


@dataclass(frozen=True)
class Source:
    url: str
    """What `git clone` gets: a URL or a local path, never holding a credential we added."""
    transport: str
    """https, http, ssh, git, file or local"""
    host: str | None = None


def _bare_host(host: str) -> str:
    host = host.strip()
    for scheme in ("https://", "http://"):
        if host.lower().startswith(scheme):
            host = host[len(scheme) :]
    return host.strip("/")


def resolve_source(integ, workdir: Path) -> Source:
    repo = integ.git_repo
    if repo.startswith(("/", "./", "../", "~")):
        path = Path(repo).expanduser()
        return Source(str(path if path.is_absolute() else workdir / path), "local")
    if "://" in repo:
        parts = urlsplit(repo)
        return Source(repo, parts.scheme.lower(), parts.netloc.rpartition("@")[2] or None)
    m = SCP_LIKE.match(repo)
    if m:
        return Source(repo, "ssh", m.group("host"))
    host = _bare_host(integ.host)
    name = repo.strip("/")
    name = name if name.endswith(".git") else name + ".git"
    if integ.ssh_clone:
        return Source(f"git@{host}:{name}", "ssh", host)
    return Source(f"https://{host}/{name}", "https", host)


def repo_name(git_repo: str) -> str:
    """The directory name git itself would pick: the last path part, without .git."""
    last = re.split(r"[/:]", git_repo.rstrip("/"))[-1]
    last = last[:-4] if last.endswith(".git") else last
    return last or "repo"


def target_path(integ, workdir: Path) -> Path:
    if integ.path:
        path = Path(integ.path).expanduser()
        return path if path.is_absolute() else workdir / path
    return workdir / repo_name(integ.git_repo)


def url_password(url: str) -> str | None:
    """A password written into a URL (https://user:pass@host/...), to be masked in the log."""
    return urlsplit(url).password if "://" in url else None


def token_for(host: str, env: dict[str, str]) -> tuple[str, str] | None:
    """(env var name, token) for `host`: the host's own token first, then GIT_TOKEN."""
    h = host.lower()
    names = []
    if "github" in h:
        names += ["GITHUB_TOKEN", "GH_TOKEN"]
    if "gitlab" in h:
        names += ["GITLAB_TOKEN"]
    names.append("GIT_TOKEN")
    for name in names:
        if env.get(name):
            return name, env[name]
    return None


def username_for(host: str, env: dict[str, str]) -> str:
    """The user name servers expect with a token: GitHub takes any, GitLab wants oauth2."""
    if env.get("GIT_USERNAME"):
        return env["GIT_USERNAME"]
    h = host.lower()
    if "github" in h:
        return "x-access-token"
    if "gitlab" in h:
        return "oauth2"
    return "git"


def _is_loopback(host: str) -> bool:
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def auth_header(source: Source, env: dict[str, str]) -> tuple[str, str, str] | None:
    """(git config key, header value, token env var) to authenticate to the source's
    host, or None. Plain http gets a token only on loopback (tests, port-forwards)."""
    if source.host is None or source.transport not in ("https", "http"):
        return None
    if source.transport == "http" and not _is_loopback(source.host):
        if token_for(source.host, env):
            out.log(f"note: not sending the git token to {source.host} over plain http")
        return None
    found = token_for(source.host, env)
    if not found:
        return None
    name, token = found
    basic = base64.b64encode(f"{username_for(source.host, env)}:{token}".encode()).decode()
    # Scoped to this host: submodules elsewhere never see the token.
    key = f"http.{source.transport}://{source.host}/.extraHeader"
    return key, f"Authorization: Basic {basic}", name


def with_git_config(env: dict[str, str], pairs: dict[str, str]) -> dict[str, str]:
    """`env` plus git config entries as GIT_CONFIG_KEY_n/VALUE_n, after any already there."""
    env = dict(env)
    try:
        n = int(env.get("GIT_CONFIG_COUNT") or 0)
    except ValueError:
        n = 0
    for key, value in pairs.items():
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
        n += 1
    env["GIT_CONFIG_COUNT"] = str(n)
    return env


def git_env(source: Source, env: dict[str, str]) -> dict[str, str]:
    """The environment for this source's git commands (and pip_install's, so that
    VCS requirements on the same host authenticate the same way)."""
    genv = {**env, "GIT_TERMINAL_PROMPT": "0"}
    config = {"advice.detachedHead": "false"}
    if source.transport == "ssh":
        if env.get("GIT_SSH_COMMAND"):
            out.log("git_repo: cloning over ssh with GIT_SSH_COMMAND (from the git-ssh secret)")
        else:
            genv["GIT_SSH_COMMAND"] = DEFAULT_SSH_COMMAND
            out.log("git_repo: no git-ssh secret (GIT_SSH_COMMAND is unset): ssh uses its default keys")
    auth = auth_header(source, env)
    if auth:
        key, header, token_var = auth
        config[key] = header
        # Mask the token and its encoded form even if no secret declared it.
        out.add_masker(Masker([header, header.split(" ", 2)[-1], env[token_var]]))
        out.log(f"git_repo: authenticating to {source.host} with the token in ${token_var}")
    return with_git_config(genv, config)


def _head(target: Path, env: dict[str, str]) -> str:
    got = subprocess.run(
        ["git", "log", "-1", "--format=%H (%s)"], cwd=target, env=env, capture_output=True, text=True, timeout=60
    )
    return got.stdout.strip() if got.returncode == 0 else "(unknown commit)"


def _checkout_commit(commit: str, target: Path, env: dict[str, str]) -> None:
    argv = ["git", "checkout", "--detach", commit, "--"]
    if run_step(argv, cwd=target, env=env, check=False) == 0:
        return
    if len(commit) not in FULL_HASH_LENGTHS:
        raise StepFailed(
            f"commit {commit} is not on any branch or tag of the repository "
            "(a full hash can also fetch a commit outside them)"
        )
    out.log(f"git_repo: commit {commit} is not on a branch or tag: fetching it by hash")
    run_step(["git", "fetch", "origin", "--", commit], cwd=target, env=env, what="git fetch")
    run_step(argv, cwd=target, env=env, what="git checkout")


def clone(integ, workdir: Path, env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """Clone and check out; return the clone's path and the git environment used."""
    source = resolve_source(integ, workdir)
    target = target_path(integ, workdir)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise StepFailed(f"{target} already exists and is not empty; remove it, or set path: to another directory")
    if source.transport != "ssh" and integ.ssh_clone:
        out.log(f"note: git_repo {integ.git_repo} is not an ssh address: ssh_clone is ignored")
    genv = git_env(source, env)
    wanted = (
        f"commit {integ.git_commit}"
        if integ.git_commit
        else f"branch {integ.git_branch}"
        if integ.git_branch
        else "the default branch"
    )
    out.log(f"git_repo: cloning {source.url} ({wanted}) into {target}")
    created = not target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if integ.git_commit:
            run_step(
                ["git", "clone", "--no-checkout", "--", source.url, str(target)],
                cwd=target.parent,
                env=genv,
                what="git clone",
            )
            _checkout_commit(integ.git_commit, target, genv)
        else:
            branch = [f"--branch={integ.git_branch}"] if integ.git_branch else []
            run_step(
                ["git", "clone", *branch, "--", source.url, str(target)], cwd=target.parent, env=genv, what="git clone"
            )
        if integ.git_clone_recursive:
            run_step(
                ["git", "submodule", "update", "--init", "--recursive"],
                cwd=target,
                env=genv,
                what="git submodule update",
            )
    except BaseException:
        if created:  # leave no half clone behind for a retry to trip over
            shutil.rmtree(target, ignore_errors=True)
        raise
    out.log(f"git_repo: {target} is at {_head(target, genv)}")
    return target, genv
