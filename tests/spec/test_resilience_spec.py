"""The `resilience` section of a run spec (not an mcli field): durations as a user writes
them, defaults, precise errors (file:line, the field, a did-you-mean), and the plan the
entrypoint reads."""

from __future__ import annotations

import json

import pytest

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from launcher.pod.plan import RankPlan, ResiliencePlan
from launcher.spec.load import load_spec_text
from launcher.spec.plan import plan_of, plan_text
from tests.spec.test_load import errors_of

SPEC = "name: a\ncommand: x\nresilience:\n  {body}\n"


def test_the_section_is_read_with_durations_and_reaches_the_plan():
    text = SPEC.format(body="{preflight: true, hang_timeout: 10m, straggler_factor: 1.5, exclude_faulty_nodes: false}")
    spec = load_spec_text(text, "spec.yaml").spec
    assert spec.resilience is not None and spec.resilience.hang_timeout == 600.0
    plan = RankPlan.from_dict(json.loads(plan_text(spec)))
    assert plan.resilience == ResiliencePlan(
        preflight=True, hang_timeout=600.0, straggler_factor=1.5, exclude_faulty_nodes=False
    )


def test_without_the_section_the_defaults_cost_nothing_and_the_submitted_spec_is_unchanged():
    spec = load_spec_text("name: a\ncommand: x\n", "spec.yaml").spec
    assert "resilience" not in spec.to_submitted()
    # The defaults leave the plan as it was (a plan without the section reads as them).
    assert "resilience" not in plan_of(spec)
    assert RankPlan.from_dict(plan_of(spec)).resilience == ResiliencePlan()
    with_folder = load_spec_text("name: a\ncommand: x\nparameters: {save_folder: ./ckpt}\n", "spec.yaml").spec
    assert plan_of(with_folder)["resilience"]["checkpoints"] == "./ckpt"
    remote = load_spec_text("name: a\ncommand: x\nparameters: {save_folder: 's3://b/ckpt'}\n", "spec.yaml").spec
    assert plan_of(remote)["resilience"]["checkpoints"] == "s3://b/ckpt"  # the rank lists a store's folder too


@pytest.mark.parametrize(
    "body, message",
    [
        (
            "{hang_timeout: soon}",
            "spec.yaml:4:18: resilience.hang_timeout: must be a duration such as 10s, 5m or a number of seconds, "
            "got 'soon'",
        ),
        ("{hang_timeout: 0}", "spec.yaml:4:18: resilience.hang_timeout: must be more than 0 s, got 0"),
        (
            "{straggler_grace: later}",
            "spec.yaml:4:21: resilience.straggler_grace: must be a duration such as 10s, 5m or a number of "
            "seconds, got 'later'",
        ),
        ("{straggler_grace: 0s}", "spec.yaml:4:21: resilience.straggler_grace: must be more than 0 s, got '0s'"),
        ("{straggler_factor: 1}", "resilience.straggler_factor: must be greater than 1"),
        ("{preflight: maybe}", "resilience.preflight: must be true or false, got 'maybe'"),
        ("{hang_timout: 5m}", "spec.yaml:4:4: resilience.hang_timout: unknown field (did you mean 'hang_timeout'?)"),
    ],
)
def test_bad_values_get_precise_messages(body, message):
    errs = errors_of(SPEC.format(body=body))
    assert any(message in e for e in errs), errs


def test_straggler_grace_is_a_duration_that_reaches_the_plan_and_a_bad_one_exits_2(tmp_path, capsys):
    spec = load_spec_text(SPEC.format(body="{straggler_grace: 5m}"), "spec.yaml").spec
    assert RankPlan.from_dict(json.loads(plan_text(spec))).resilience.straggler_grace == 300.0
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(body="{straggler_grace: -3s}"))
    capsys.readouterr()
    try:
        code = run_cli(cli, ["validate", "-f", str(path)])
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{path}:4:21: resilience.straggler_grace: must be a duration such as 10s, 5m" in err, err


def test_a_misspelt_section_name_is_caught():
    errs = errors_of("name: a\ncommand: x\nresilence: {preflight: true}\n")
    assert any("resilence: unknown field (did you mean 'resilience'?)" in e for e in errs), errs
