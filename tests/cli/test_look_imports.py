"""A look across profiles (`get runs`, a run looked for everywhere, `util`, placement)
asks every profile at once, each in a thread. Python 3.11 does not import safely in
parallel (two threads importing overlapping modules may be handed one still half run:
"partially initialized module 'logging' has no attribute 'getLogger'", one `get runs` in
a few hundred in CI), so each thread imports what its look needs in turn with the others
(registry.load_for_looks), then makes its requests alongside them.

That holds only while the declared modules are all a look imports. Here, in a fresh
process, against a cluster with Kueue and a local backend, each with a run: once
load_for_looks has run, every look of each profile (listing, one run's record, GPU and
queue usage, a spec's check and free GPUs) imports nothing more."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.test_kueue import PROFILE
from tests.cli.test_kueue import run as kube_run

LOOKS = r"""
import json, sys
from launcher.backends import registry
from launcher.config import load_config
from launcher.errors import LauncherError

profile, spec_path = load_config().profile(sys.argv[1]), sys.argv[2]
registry.check_reachable(profile)
registry.load_for_looks(profile, listing_only=True)
before = set(sys.modules)
backend = registry.open_backend(profile)  # what `get runs` and `describe` ask each profile
runs = backend.list()
assert runs, f"{profile.name} lists no run"
backend.get(runs[0].name)
backend.close()
imported = set(sys.modules) - before

from launcher.spec.load import load_spec

spec = load_spec(spec_path).spec  # placement parses the spec before it asks
registry.load_for_looks(profile)
before = set(sys.modules)
backend = registry.open_backend(profile)  # what `util` and placement ask each profile
backend.gpu_usage()
backend.queue_usage()
try:
    backend.check(spec)
    backend.free_gpus(spec)
except LauncherError:
    pass  # the local backend has no free GPUs to tell: its error is part of the look
backend.close()
print(json.dumps(sorted(imported | (set(sys.modules) - before))))
"""


@pytest.fixture
def a_run_on_each(cli, fake_kueue):
    """Profiles `fake` (a cluster with Kueue, its run sleeping) and `local` (its run done)."""
    fake_kueue(queues={"team": 8}, profile=PROFILE)
    kube_run(cli, "on-kube", "sleep 600", gpus=4)
    local = cli.spec("on-local", "name: on-local\ncommand: echo hi\n")
    r = cli("run", "-f", str(local), "--cluster", "local", "--follow")
    assert r.returncode == 0, r.stderr


def test_a_look_imports_nothing_past_what_load_for_looks_imported(cli, a_run_on_each):
    specs = {"fake": cli.spec("placed", "name: placed\ncommand: echo hi\ncompute: {gpus: 4, gpu_type: gpu}\n"),
             "local": cli.spec("placed-here",
                               "name: placed-here\ncommand: echo hi\ncompute: {gpus: 1, gpu_type: a100_80gb}\n")}

    imported = {}
    for profile, spec in specs.items():  # each in a fresh process: one profile's imports hide none of another's
        look = subprocess.run([sys.executable, "-c", LOOKS, profile, str(spec)], cwd=cli.cwd, env=cli.env,
                              capture_output=True, text=True, timeout=120)
        assert look.returncode == 0, look.stderr
        imported[profile] = json.loads(look.stdout)
    assert imported == {"fake": [], "local": []}, ("modules a look imports in its thread, past BackendKind.listing "
                                                   "or .beyond_listing (add them there): " + json.dumps(imported))


# Every import a thread of the look makes, seen by a finder that finds nothing: Python asks
# the finders only for a module it has not imported yet.
THREADS = r"""
import json, sys, threading, time

seen = []


class Observer:
    def find_spec(self, name, path=None, target=None):
        if threading.current_thread() is not threading.main_thread():
            seen.append((threading.current_thread().name, name, time.monotonic()))
        return None


sys.meta_path.insert(0, Observer())
from launcher import sdk

listed = sdk.get_runs()
windows = {}  # thread: [its first import's time, its last's, the modules]
for thread, name, at in seen:
    window = windows.setdefault(thread, [at, at, []])
    window[1] = at
    window[2].append(name)
print(json.dumps({"runs": sorted(r.name.rsplit("-", 1)[0] for r in listed), "windows": windows}))
"""


def test_the_threads_of_a_look_take_turns_to_import(cli, a_run_on_each):
    look = subprocess.run([sys.executable, "-c", THREADS], cwd=cli.cwd, env=cli.env, capture_output=True, text=True,
                          timeout=120)
    assert look.returncode == 0, look.stderr
    seen = json.loads(look.stdout)
    assert seen["runs"] == ["on-kube", "on-local"], seen["runs"]
    windows = seen["windows"]
    assert set(windows) == {"ask-fake", "ask-local"}, windows  # each imported its backend itself
    (first, a), (second, b) = sorted(windows.items(), key=lambda item: item[1][0])
    assert a[1] < b[0], (f"{first} imported from {a[0]:.3f} to {a[1]:.3f} and {second} from {b[0]:.3f}: "
                         f"at once ({first}: {a[2][:10]}..., {second}: {b[2][:10]}...)")
