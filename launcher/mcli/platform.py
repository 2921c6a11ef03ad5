"""What only the MosaicML platform has: its API key and the inference deployments it serves.
Each keeps mcli's signature (so a script fails at the call, with the reason, not at
import) and raises NotSupported saying why."""

from __future__ import annotations

from typing import Any, NoReturn

from launcher.mcli.exceptions import NotSupported

__all__ = [
    "create_default_deployment",
    "create_inference_deployment",
    "delete_inference_deployment",
    "delete_inference_deployments",
    "get_inference_deployment",
    "get_inference_deployment_logs",
    "get_inference_deployments",
    "initialize",
    "ping",
    "predict",
    "set_api_key",
    "update_inference_deployment",
    "update_inference_deployments",
]

_NO_API_KEY = (
    "the launcher has no API key and no organization: it runs on this machine and on the "
    "Kubernetes clusters of your cluster profiles, with their own credentials"
)
_NO_INFERENCE = (
    "inference deployments are the MosaicML platform's: the launcher runs training (and interactive) runs only"
)


def _api_key(call: str) -> NoReturn:
    raise NotSupported(f"{call}: {_NO_API_KEY}", "`launcher cluster add` sets up where runs go")


def _inference(call: str) -> NoReturn:
    raise NotSupported(f"{call}: {_NO_INFERENCE}")


def initialize(api_key: str | None = None) -> NoReturn:
    _api_key("initialize")


def set_api_key(api_key: str) -> NoReturn:
    _api_key("set_api_key")


def create_inference_deployment(deployment: Any, *, timeout: float | None = 10, future: bool = False) -> NoReturn:
    _inference("create_inference_deployment")


def create_default_deployment(
    name: str,
    compute: Any,
    replicas: int,
    model_type: str,
    checkpoint_path: Any,
    *,
    timeout: float | None = 10,
    future: bool = False,
) -> NoReturn:
    _inference("create_default_deployment")


def get_inference_deployment(deployment: Any, *, timeout: float | None = 10, future: bool = False) -> NoReturn:
    _inference("get_inference_deployment")


def get_inference_deployments(
    deployments: Any = None,
    *,
    clusters: Any = None,
    before: Any = None,
    after: Any = None,
    gpu_types: Any = None,
    gpu_nums: Any = None,
    statuses: Any = None,
    timeout: float | None = 10,
    future: bool = False,
) -> NoReturn:
    _inference("get_inference_deployments")


def get_inference_deployment_logs(
    deployment: Any,
    *,
    restart: bool | None = None,
    timeout: float | None = None,
    future: bool = False,
    failed: bool | None = False,
    follow: bool | None = False,
    tail: int | None = None,
) -> NoReturn:
    _inference("get_inference_deployment_logs")


def update_inference_deployment(
    deployment: Any, updates: dict[str, Any], *, timeout: float | None = 10, future: bool = False
) -> NoReturn:
    _inference("update_inference_deployment")


def update_inference_deployments(
    deployments: Any, updates: dict[str, Any], *, timeout: float | None = 10, future: bool = False
) -> NoReturn:
    _inference("update_inference_deployments")


def delete_inference_deployment(deployment: Any, *, timeout: float | None = 10, future: bool = False) -> NoReturn:
    _inference("delete_inference_deployment")


def delete_inference_deployments(deployments: Any, *, timeout: float | None = 10, future: bool = False) -> NoReturn:
    _inference("delete_inference_deployments")


def ping(deployment: Any, *, timeout: float | None = 10) -> NoReturn:
    _inference("ping")


def predict(deployment: Any, inputs: dict[str, Any], *, timeout: float | None = 60, stream: bool = False) -> NoReturn:
    _inference("predict")
