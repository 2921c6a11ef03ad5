"""images/Dockerfile stays buildable in shape: CUDA PyTorch base, the train extra, our entrypoint."""

from __future__ import annotations

import json
from pathlib import Path

from dockerfile_parse import DockerfileParser

REPO = Path(__file__).resolve().parents[2]


def parsed() -> DockerfileParser:
    df = DockerfileParser(path=str(REPO / "images" / "Dockerfile"))
    return df


def test_base_is_cuda_pytorch_matching_composer_pin() -> None:
    df = parsed()
    image = df.baseimage
    assert image.startswith("pytorch/pytorch:2.7.0-cuda") and "cudnn" in image
    assert len([i for i in df.structure if i["instruction"] == "FROM"]) == 1


def test_installs_the_train_extra_from_the_copied_sources() -> None:
    df = parsed()
    copies = [i["value"] for i in df.structure if i["instruction"] == "COPY"]
    assert any("pyproject.toml" in c for c in copies) and any(c.startswith("launcher ") for c in copies)
    runs = " ".join(i["value"] for i in df.structure if i["instruction"] == "RUN")
    assert 'pip install ".[train]"' in runs
    for path in [c.split()[0] for c in copies]:
        for part in path.split():
            assert (REPO / part).exists() or part == "README.md", f"COPY source {part} missing from the repo"


def test_entrypoint_is_the_launcher_entrypoint_in_exec_form() -> None:
    df = parsed()
    entry = [i["value"] for i in df.structure if i["instruction"] == "ENTRYPOINT"]
    assert len(entry) == 1
    assert json.loads(entry[0]) == ["python", "-m", "launcher.entrypoint"]
