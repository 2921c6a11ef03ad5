"""decide(): the pure choice of a cluster for a run from its candidates' free GPUs
(launcher.sdk.placement), and the spec fields that ask for it."""

from __future__ import annotations

import pytest

from launcher.backends.capabilities import FreeGpus
from launcher.errors import SpecError
from launcher.sdk.placement import Candidate, decide
from launcher.spec.load import load_spec_text
from launcher.spec.models import is_placed


def spec(gpus: int = 8) -> dict:
    return {"name": "x", "command": "true", "compute": {"gpus": gpus, "gpu_type": "h100_80gb"}}


def free(profile: str, n: int, total: int = 16, source: str = "nodes") -> Candidate:
    return Candidate(profile, FreeGpus("h100_80gb", n, total, source))


def test_the_first_profile_in_order_whose_free_gpus_fit_takes_the_run():
    d = decide(spec(8), [free("gke-a", 0, 8), free("gke-b", 16), free("gke-c", 16)])
    assert (d.chosen, d.fits) == ("gke-b", True)
    assert d.line() == (
        "placement: gke-a has 0 of 8 free h100_80gb, gke-b has 16 of 16 free h100_80gb, "
        "gke-c has 16 of 16 free h100_80gb: placed on gke-b"
    )


def test_exactly_enough_free_gpus_fit():
    assert decide(spec(8), [free("a", 7), free("b", 8)]).chosen == "b"


def test_a_profile_that_could_not_be_asked_is_passed_over_and_named():
    d = decide(spec(8), [Candidate("gke-a", error="cluster gke-a: no answer within 3 s"), free("gke-b", 8)])
    assert d.chosen == "gke-b"
    assert d.line().startswith("placement: gke-a could not be asked (no answer within 3 s), gke-b has 8 of 16")


def test_when_none_fits_the_run_waits_on_the_first_that_answered():
    d = decide(spec(32), [Candidate("a", error="cluster a: cannot connect"), free("b", 8), free("c", 16)])
    assert (d.chosen, d.fits) == ("b", False)
    assert d.line().endswith("none has 32 free; placed on b, the first that answered, where it waits in the queue")


def test_when_no_profile_answers_there_is_no_choice():
    d = decide(spec(8), [Candidate("a", error="x"), Candidate("b", error="y")])
    assert d.chosen is None and d.line().endswith("no cluster can take the run")


def test_a_cpu_run_goes_to_the_first_that_answered():
    d = decide(spec(0), [Candidate("a", error="x"), Candidate("b", FreeGpus("none", 0, 0)), free("c", 16)])
    assert (d.chosen, d.fits) == ("b", True)
    assert "b takes CPU runs" in d.line()


def test_a_queue_is_named_as_the_source_of_the_numbers():
    d = decide(spec(8), [free("a", 8, 32, source="queue team-a-cq")])
    assert d.line() == "placement: a's queue team-a-cq has 8 of 32 free h100_80gb: placed on a"


@pytest.mark.parametrize(
    "cluster, placed", [("auto", True), ("a,b", True), (["a", "b"], True), ("a", False), (["a"], False), (None, False)]
)
def test_auto_or_several_profiles_is_a_placement(cluster, placed):
    assert is_placed(cluster) is placed


@pytest.mark.parametrize(
    "text",
    [
        "compute:\n  cluster: auto\n",
        "compute:\n  cluster: gke-a, gke-b\n",
        "compute:\n  cluster: [gke-a, gke-b]\nplacement:\n  max_queue: 15m\n",
    ],
)
def test_the_spec_takes_auto_a_comma_list_or_a_yaml_list(text):
    loaded = load_spec_text('name: x\ncommand: "true"\n' + text, "run.yaml").spec
    assert is_placed(loaded.compute.cluster)
    if loaded.placement is not None:
        assert loaded.placement.max_queue == 900


@pytest.mark.parametrize(
    "text, message",
    [
        ("compute:\n  cluster: [auto, gke-b]\n", "run.yaml:4:12: compute.cluster: auto means every cluster profile"),
        ("compute:\n  cluster: a,a\n", "run.yaml:4:12: compute.cluster: names a cluster twice"),
        ("placement:\n  max_queue: 0\n", "run.yaml:4:14: placement.max_queue: must be more than 0 s"),
        ("placement:\n  max_queue: soon\n", "run.yaml:4:14: placement.max_queue: must be a duration"),
    ],
)
def test_a_bad_placement_field_is_placed_at_its_line(text, message):
    with pytest.raises(SpecError) as e:
        load_spec_text('name: x\ncommand: "true"\n' + text, "run.yaml")
    assert message in str(e.value)


def on_demand(profile: str, n: int = 8, source: str = "a new job cluster of 1 p5.48xlarge") -> Candidate:
    return Candidate(profile, FreeGpus("h100_80gb", n, n, source, on_demand=True))


def test_free_gpus_now_come_before_machines_made_for_the_run_and_those_before_a_queue():
    d = decide(spec(8), [free("gke-a", 0, 8), on_demand("dbx"), on_demand("dbx-2"), free("gke-b", 8)])
    assert (d.chosen, d.fits) == ("gke-b", True)
    d = decide(spec(8), [free("gke-a", 0, 8), on_demand("dbx"), on_demand("dbx-2")])
    assert (d.chosen, d.fits) == ("dbx", True)
    assert d.line() == (
        "placement: gke-a has 0 of 8 free h100_80gb, dbx makes a new job cluster of 1 p5.48xlarge for it "
        "(8 h100_80gb), dbx-2 makes a new job cluster of 1 p5.48xlarge for it (8 h100_80gb): placed on dbx"
    )
