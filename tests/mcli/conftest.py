from __future__ import annotations

# The git server over HTTP on 127.0.0.1, shared with the entrypoint tests.
from tests.cli.conftest import cli  # noqa: F401 - fixture
from tests.entrypoint.conftest import git_http, origin  # noqa: F401 - fixtures
