"""/_fake/: the admin API that tests use against the fake run as a program (no real
client calls these paths). Requests here are neither recorded nor subject to faults.

  GET    /_fake/healthz                  200 "ok"
  GET    /_fake/faults                   {"rules": [FaultRule...], "knobs": {...}}
  POST   /_fake/faults                   FaultRule fields -> 201 the rule (with its id)
  PATCH  /_fake/faults                   set knobs: {"gone_watches": 2, "hold_pods": true, ...}
  DELETE /_fake/faults                   clear every rule and connection fault
  POST   /_fake/connections              {"refuse": seconds} or {"stall": seconds}
  GET    /_fake/requests                 [[method, kind, verb], ...] since the start
  GET    /_fake/lists                    [{kind, labelSelector, limit, continue, metadataOnly}, ...]
  POST   /_fake/evict                    {"name": pod, "namespace": "default", "reason": ...}
  POST   /_fake/node-faults              {"node": name, "kind": "xid", "taint": bool}: FakeKube.fault_node
  POST   /_fake/pod-faults               {"kind": "hang"|"slow"|"oom", "pod": glob, "rank": N,
                                         "after": S, "times": N}: FakeKube.fault_pod
  POST   /_fake/compact                  drop the watch history (410 Gone for older versions)
"""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.common import ApiError


def handle_admin(handler, method: str, parts: list[str], body: Any) -> None:
    k = handler.kube
    body = body or {}
    route = (method, "/".join(parts))
    try:
        if route == ("GET", "healthz"):
            return handler.send_json(200, "ok")
        if route == ("GET", "faults"):
            return handler.send_json(
                200, {"rules": [r.to_json() for r in k.faults.list_rules()], "knobs": k.faults.knobs()}
            )
        if route == ("POST", "faults"):
            fields = {
                key: body[key]
                for key in (
                    "verb",
                    "resource",
                    "status",
                    "times",
                    "lose_response",
                    "delay",
                    "name",
                    "message",
                    "after_commit",
                )
                if key in body
            }
            return handler.send_json(201, k.faults.inject(**fields).to_json())
        if route == ("PATCH", "faults"):
            k.faults.set(**body)
            return handler.send_json(200, k.faults.knobs())
        if route == ("DELETE", "faults"):
            k.faults.clear()
            return handler.send_json(200, {"rules": []})
        if route == ("POST", "connections"):
            handler.send_json(200, {"ok": True})
            handler.wfile.flush()
            if "refuse" in body:
                k.faults.refuse_connections(float(body["refuse"]))
            elif "stall" in body:
                k.faults.stall_connections(float(body["stall"]))
            return None
        if route == ("GET", "requests"):
            with k.lock:
                return handler.send_json(200, [list(r) for r in k.requests])
        if route == ("GET", "lists"):
            with k.lock:
                return handler.send_json(200, list(k.lists))
        if route == ("POST", "evict"):
            k.evict(body["name"], body.get("namespace", "default"), body.get("reason", "PreemptionByScheduler"))
            return handler.send_json(200, {"ok": True})
        if route == ("POST", "node-faults"):
            k.fault_node(body["node"], body["kind"], taint=bool(body.get("taint")))
            return handler.send_json(200, k.faults.knobs())
        if route == ("POST", "pod-faults"):
            k.fault_pod(body["kind"], **{key: body[key] for key in ("pod", "rank", "after", "times") if key in body})
            return handler.send_json(200, k.faults.knobs())
        if route == ("POST", "compact"):
            k.compact()
            return handler.send_json(200, {"resourceVersion": str(k.rv)})
    except (ValueError, TypeError, KeyError) as e:
        raise ApiError(400, "BadRequest", f"/_fake/{'/'.join(parts)}: {type(e).__name__}: {e}") from None
    raise ApiError(404, "NotFound", f"no admin route {method} /_fake/{'/'.join(parts)}")
