"""Whatever bytes or structures a user feeds the loader, it raises only SpecError."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from launcher.errors import SpecError
from launcher.spec.load import Overrides, load_spec_text

FIELDS = [
    "name",
    "image",
    "command",
    "compute",
    "gpus",
    "nodes",
    "integrations",
    "env_variables",
    "secrets",
    "data",
    "remote",
    "parameters",
    "scheduling",
    "max_retries",
    "integration_type",
    "git_repo",
    "run_name",
    "gpu_num",
    "packages",
    "key",
    "value",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["dbfs:/Volumes/a/b/c", "s3://b", "git_repo", "wandb"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(FIELDS), inner, max_size=5)),
    max_leaves=20,
)


def _only_spec_errors(text) -> None:
    try:
        load_spec_text(text, "fuzz.yaml")
    except SpecError as e:
        assert all(i.render() for i in e.issues)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), values, max_size=8))
# Found by CI: a list where a union's discriminator belongs crashed the did-you-mean walk.
@example({"name": None, "integrations": [{"name": None, "integration_type": []}]})
@example({"integrations": [{"integration_type": {"a": 1}}]})
def test_structured_documents(doc):
    _only_spec_errors(yaml.safe_dump(doc))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    _only_spec_errors(data)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*list("ab: -[]{}&*!|>'\"\n\t#,?%@`"), "name", "command", "<<"]), max_size=60).map("".join)
)
def test_yaml_punctuation_soup(text):
    _only_spec_errors(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=3), st.lists(st.text(max_size=30), max_size=3))
def test_arbitrary_overrides(sets, envs):
    try:
        load_spec_text("name: a\ncommand: x\n", "o.yaml", Overrides(set=sets, env=envs))
    except SpecError:
        pass
