"""A run's record types its spec as SubmittedSpec (launcher.backends.base), the JSON form
RunSpec.to_submitted writes: the two must name the same fields, or a field added to the
model goes untyped (and unchecked) wherever a record is read."""

from launcher.backends.base import SubmittedCompute, SubmittedScheduling, SubmittedSpec
from launcher.spec.models import Compute, RunSpec, Scheduling


def test_the_record_type_names_every_field_the_spec_submits():
    for typed, model in ((SubmittedSpec, RunSpec), (SubmittedCompute, Compute), (SubmittedScheduling, Scheduling)):
        assert typed.__optional_keys__ == set(model.model_fields), model.__name__


def test_a_submitted_spec_has_only_the_keys_its_type_names():
    spec = RunSpec.model_validate(
        {
            "name": "a",
            "command": "x",
            "compute": {"gpus": 1, "topology": {"level": "rack"}},
            "scheduling": {"watchdogEnabled": True, "retry_backoff": {"first": 1}},
        }
    )
    submitted = spec.to_submitted()
    assert set(submitted) <= SubmittedSpec.__optional_keys__
    assert set(submitted["compute"]) <= SubmittedCompute.__optional_keys__
    assert set(submitted["scheduling"]) <= SubmittedScheduling.__optional_keys__
