"""The checkpoint a retried attempt resumed from, as a rank in a container leaves it in its
termination message (a line `RESUMED_PREFIX` and JSON {"path", "step"}), which a pod's status
carries back when it ends: the Kubernetes backend reads it into the Attempt
(launcher.backends.kubernetes.attempts), as the local backend reads it from the exit file.
Standard library only: the entrypoint runs it on any Python 3.8 (launcher.pod.zipapp).
"""

from __future__ import annotations

import json

RESUMED_PREFIX = "@@launcher.resumed "


def termination_line(resumed: dict) -> str:
    return RESUMED_PREFIX + json.dumps({"path": resumed.get("path"), "step": resumed.get("step")})


def from_termination_message(message: str | None) -> tuple[str | None, dict | None]:
    """A termination message less its resumed line, and what that line says ({"path": str,
    "step": int or None}; None without a readable one)."""
    if not message or RESUMED_PREFIX not in message:
        return message, None
    rest, resumed = [], None
    for text in message.splitlines():
        if not text.startswith(RESUMED_PREFIX):
            rest.append(text)
            continue
        try:
            said = json.loads(text[len(RESUMED_PREFIX) :])
        except ValueError:
            continue
        if isinstance(said, dict) and isinstance(said.get("path"), str):
            step = said.get("step")
            resumed = {"path": said["path"], "step": step if isinstance(step, int) else None}
    return "\n".join(rest), resumed
