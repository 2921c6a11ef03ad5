"""The trainer runs Python's garbage collector on a schedule (callbacks.scheduled_gc): no
automatic collection while training, collections at the configured batches, automatic
collection during evaluation, and the collector as it was after the run, finished or failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.train.conftest import REPO, run_trainer, tiny_config, train_env

pytestmark = pytest.mark.train

# Three trainings in one process: the collector's state is per process, which is the point.
SCRIPT = r"""
import gc, json, sys
from composer.core import Callback
from launcher.train.main import train

class Watch(Callback):
    def __init__(self):
        self.state = None
        self.in_eval = False
        self.collections = []   # (batch, generation, automatic?) of each collection outside evaluation
        self.enabled = {"train": set(), "eval": set()}
        gc.callbacks.append(self.on_gc)

    def on_gc(self, phase, info):
        if phase == "start" and self.state is not None and not self.in_eval:
            self.collections.append((int(self.state.timestamp.batch), info["generation"], gc.isenabled()))

    def init(self, state, logger):
        self.state = state

    def batch_end(self, state, logger):
        self.enabled["train"].add(gc.isenabled())

    def eval_start(self, state, logger):
        self.in_eval = True

    def eval_batch_end(self, state, logger):
        self.enabled["eval"].add(gc.isenabled())

    def eval_end(self, state, logger):
        self.in_eval = False

    def fit_end(self, state, logger):
        self.state = None
        gc.callbacks.remove(self.on_gc)

class FailAt(Callback):
    def batch_end(self, state, logger):
        if int(state.timestamp.batch) == 3:
            raise RuntimeError("failing on purpose at batch 3")

out = {}
watch = Watch()
train(sys.argv[1], extra_callbacks=[watch])
out["schedule"] = {"collections": watch.collections, "enabled": {k: sorted(v) for k, v in watch.enabled.items()},
                   "after": gc.isenabled()}
watch = Watch()
train(sys.argv[2], extra_callbacks=[watch])
out["eval"] = {"enabled": {k: sorted(v) for k, v in watch.enabled.items()}, "after": gc.isenabled()}
try:
    train(sys.argv[1], extra_callbacks=[FailAt()])
except RuntimeError as e:
    out["failed"] = {"error": str(e), "after": gc.isenabled()}
print("RESULT " + json.dumps(out))
"""


def test_garbage_is_collected_on_schedule_not_automatically(tmp_path: Path, number_say) -> None:
    schedule = {"scheduled_gc": {"batch_interval": 12, "gen_1_batch_interval": 5}}
    cfg = tiny_config(
        tmp_path / "schedule.yaml",
        tokenizer=number_say.tokenizer,
        remote=str(number_say.mds),
        max_duration="14ba",
        callbacks=schedule,
    )
    with_eval = tiny_config(
        tmp_path / "eval.yaml",
        tokenizer=number_say.tokenizer,
        remote=str(number_say.mds),
        max_duration="8ba",
        eval_loader=True,
        eval_interval="4ba",
        eval_subset_num_batches=2,
    )
    proc = run_trainer(["-c", SCRIPT, str(cfg), str(with_eval)], train_env(RUN_NAME="gc-schedule"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])

    ran = result["schedule"]
    # A full collection as training starts, generation 1 at batches 5 and 10, a full one at 12;
    # no automatic one while training (Composer's allocations set one off about every step).
    assert [(b, g) for b, g, automatic in ran["collections"] if not automatic] == [(0, 2), (5, 1), (10, 1), (12, 2)]
    assert [c for c in ran["collections"] if c[2] and 0 < c[0] < 14] == []
    assert ran["enabled"]["train"] == [False]
    assert ran["after"] is True

    # Defaults, with evaluation: automatic collection is on while evaluating, off while training.
    assert result["eval"]["enabled"] == {"train": [False], "eval": [True]}
    assert result["eval"]["after"] is True

    # A run that fails mid-way leaves the collector as it found it.
    assert result["failed"] == {"error": "failing on purpose at batch 3", "after": True}


def test_bad_schedule_is_one_line_and_exit_2(tmp_path: Path, number_say) -> None:
    cfg = tiny_config(
        tmp_path / "bad.yaml",
        tokenizer=number_say.tokenizer,
        remote=str(number_say.mds),
        callbacks={"scheduled_gc": {"batch_interval": 0}},
    )
    proc = run_trainer(["-m", "launcher.train", str(cfg)], train_env(), cwd=REPO)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "✗ callbacks.scheduled_gc: batch_interval must be a whole number of batches >= 1, got 0" in proc.stderr
    assert "Traceback" not in proc.stderr

    from launcher.errors import InputError
    from launcher.train.collector import ScheduledGarbageCollector
    from launcher.train.trackers import construct

    with pytest.raises(InputError, match=r"^callbacks.scheduled_gc: .*'batch_intervall'"):
        construct("callbacks.scheduled_gc", ScheduledGarbageCollector, {"batch_intervall": 100})
