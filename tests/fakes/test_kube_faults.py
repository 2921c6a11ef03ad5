"""Fault injection of the fake API server, seen by the real kubernetes client: error
answers, a create whose response is lost, refused and stalled connections, 410 on watch,
in this process and against the fake run as a program."""

from __future__ import annotations

import json
import socket
import time

import kubernetes
import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from tests.conftest import wait_until
from tests.fakes.kube.cluster import FakeKube
from tests.fakes.kube.faults import unreachable_server


def core_api(kubeconfig) -> kubernetes.client.CoreV1Api:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
    config.retries = False  # see each fault as it is, not after urllib3's retries
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def config_map(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


@pytest.fixture
def kube(tmp_path):
    k = FakeKube(run_controllers=False).start()
    k.kubeconfig = k.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield k
    finally:
        k.close()


def test_status_faults_answer_the_next_matching_requests_then_stop(kube):
    api = core_api(kube.kubeconfig)
    rule = kube.faults.inject("create", "configmaps", status=504, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            api.create_namespaced_config_map("default", config_map("a"))
        assert e.value.status == 504 and json.loads(e.value.body)["reason"] == "Timeout"
    api.list_namespaced_config_map("default")  # another verb is not affected
    api.create_namespaced_config_map("default", config_map("a"))
    assert [r.fired for r in kube.faults.list_rules()] == [2] and rule.id
    # Nothing was stored by the refused creates; the third one worked.
    assert [o["metadata"]["name"] for o in kube.list("ConfigMap", "default")[0]] == ["a"]


def test_a_lost_response_still_commits_the_create(kube):
    api = core_api(kube.kubeconfig)
    kube.faults.inject("create", "configmaps", lose_response=True)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        api.create_namespaced_config_map("default", config_map("lost"))
    assert kube.get("ConfigMap", "default", "lost")["data"] == {"k": "v"}
    with pytest.raises(ApiException) as e:  # what a blind retry meets
        api.create_namespaced_config_map("default", config_map("lost"))
    assert e.value.status == 409


def test_a_504_after_commit_stores_the_object(kube):
    api = core_api(kube.kubeconfig)
    kube.faults.inject("create", "configmaps", status=504, after_commit=True)
    with pytest.raises(ApiException) as e:
        api.create_namespaced_config_map("default", config_map("late"))
    assert e.value.status == 504
    assert kube.get("ConfigMap", "default", "late")["data"] == {"k": "v"}


def test_watch_answered_410_gone_as_an_error_event(kube):
    api = core_api(kube.kubeconfig)
    kube.faults.inject("watch", "pods", status=410)
    resp = api.list_namespaced_pod(
        "default", watch=True, resource_version="1", timeout_seconds=5, _preload_content=False
    )
    events = [json.loads(line) for line in resp.read().splitlines()]
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in events] == [("ERROR", 410, "Expired")]


def answers(api, timeout: float) -> bool:
    """Whether the server answers a list of pods within `timeout` seconds."""
    try:
        api.list_namespaced_pod("default", _request_timeout=timeout)
        return True
    except urllib3.exceptions.HTTPError:  # refused, cut or timed out
        return False


def test_refused_connections_come_back_on_the_same_port(kube):
    api = core_api(kube.kubeconfig)
    api.list_namespaced_pod("default")  # a pooled keep-alive connection
    kube.faults.refuse_connections(1.0)
    # It is cut (urllib3 may notice before reusing it, and then it meets a refusal).
    with pytest.raises((urllib3.exceptions.ProtocolError, urllib3.exceptions.NewConnectionError)):
        api.list_namespaced_pod("default", _request_timeout=2)
    with pytest.raises(urllib3.exceptions.NewConnectionError):  # and new ones are refused
        api.list_namespaced_pod("default", _request_timeout=2)
    wait_until(lambda: answers(api, 5), 10, message="the server to accept connections again")
    assert api.list_namespaced_pod("default", _request_timeout=5).items == []


def test_a_stalled_server_times_reads_out_and_a_delay_slows_one_verb(kube):
    api = core_api(kube.kubeconfig)
    # The stall outlasts the read timeout by far, so that a busy machine cannot make a
    # timed-out read look like one that waited for the server.
    kube.faults.stall_connections(5.0)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        api.list_namespaced_pod("default", _request_timeout=(1, 0.5))
    assert time.monotonic() - started < 4.0
    wait_until(
        lambda: answers(api, 0.5), 15, message="the stall to end"
    )  # the abandoned request is answered (to nobody)
    kube.faults.inject("list", "pods", delay=0.6)
    started = time.monotonic()
    api.list_namespaced_pod("default", _request_timeout=5)
    assert time.monotonic() - started >= 0.6


@pytest.mark.parametrize("mode, error", [("refused", ConnectionRefusedError), ("stalled", TimeoutError)])
def test_unreachable_server(mode, error):
    with unreachable_server(mode) as url:
        host, port = url.removeprefix("http://").split(":")
        with pytest.raises(error):
            socket.create_connection((host, int(port)), timeout=0.5)


def test_the_program_takes_faults_over_http_and_stops_its_pods(fake_kube_program):
    prog = fake_kube_program("--nodes", "1")
    api = core_api(prog.kubeconfig)
    rule = prog.faults.inject("list", "pods", status=503)
    with pytest.raises(ApiException) as e:
        api.list_namespaced_pod("default")
    assert e.value.status == 503
    assert [r.fired for r in prog.faults.list_rules()] == [1] and rule.id == 1
    assert prog.count(verb="list", kind="Pod") == 1
    assert prog.pods() == [] and prog.get("Namespace", "", "default")["status"]["phase"] == "Active"
    prog.faults.clear()
    api.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "sleeper"},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "300"]}]},
        },
    )
    wait_until(
        lambda: api.read_namespaced_pod("sleeper", "default").status.phase == "Running", 20, message="the pod to run"
    )
    pid = int(api.read_namespaced_pod("sleeper", "default").status.container_statuses[0].container_id.split("//")[1])
    assert prog.stop() == 0
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


def test_a_node_fault_marks_the_node_and_fails_its_containers_with_the_xid_line(fake_kube_program):
    prog = fake_kube_program("--nodes", "2", "--fault", "node=fake-node-1,kind=xid")
    api = core_api(prog.kubeconfig)
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus"

    def conditions(node: str) -> dict:
        return {c["type"]: c for c in prog.get("Node", "", node)["status"]["conditions"]}

    faulty = conditions("fake-node-1")["GpuXid"]
    assert (faulty["status"], faulty["reason"], faulty["message"]) == ("True", "XidError", xid)
    assert "GpuXid" not in conditions("fake-node-0")

    def pod(name: str, node: str) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo fine"]}],
            },
        }

    api.create_namespaced_pod("default", pod("on-bad", "fake-node-1"))
    api.create_namespaced_pod("default", pod("on-good", "fake-node-0"))
    ended = lambda n: api.read_namespaced_pod(n, "default").status.phase in ("Succeeded", "Failed")  # noqa: E731
    wait_until(lambda: ended("on-bad") and ended("on-good"), 20, message="both pods to end")
    bad = api.read_namespaced_pod("on-bad", "default").status
    assert bad.phase == "Failed" and bad.container_statuses[0].state.terminated.exit_code == 1
    assert api.read_namespaced_pod_log("on-bad", "default").strip() == xid
    assert api.read_namespaced_pod("on-good", "default").status.phase == "Succeeded"
    assert api.read_namespaced_pod_log("on-good", "default").strip() == "fine"

    # At run time, through the admin API: the other node too.
    prog.fault_node("fake-node-0", "xid")
    assert conditions("fake-node-0")["GpuXid"]["reason"] == "XidError"
    assert prog.faults.knobs()["node_faults"] == {"fake-node-0": "xid", "fake-node-1": "xid"}


def test_pod_faults_oom_kill_a_rank_and_stop_another(fake_kube_program):
    prog = fake_kube_program("--nodes", "1", "--grace-seconds", "1", "--fault", "pod=eater-*,kind=oom,after=0.5")
    api = core_api(prog.kubeconfig)
    counts = "import time\nfor i in range(600):\n    print(i, flush=True)\n    time.sleep(0.05)\n"

    def pod(name: str) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["python3", "-c", counts]}],
            },
        }

    api.create_namespaced_pod("default", pod("eater-1"))
    wait_until(lambda: api.read_namespaced_pod("eater-1", "default").status.phase == "Failed", 20, message="the OOM")
    terminated = api.read_namespaced_pod("eater-1", "default").status.container_statuses[0].state.terminated
    assert (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)  # what a kubelet reports
    assert api.read_namespaced_pod_log("eater-1", "default").split()[:3] == ["0", "1", "2"]  # it ran first
    assert [(f["kind"], f["fired"]) for f in prog.faults.knobs()["pod_faults"]] == [("oom", 1)]

    # At run time: the next pod of that name hangs (its processes stop) and stays Running.
    prog.fault_pod("hang", pod="stuck", after=0.5)
    api.create_namespaced_pod("default", pod("stuck"))
    fired = lambda: prog.faults.knobs()["pod_faults"][1]["fired"] == 1  # noqa: E731
    wait_until(fired, 20, message="the hang to strike")

    def log_lines() -> int:
        return len(api.read_namespaced_pod_log("stuck", "default").split())

    stopped = wait_until(
        lambda: (n := log_lines()) > 0 and time.sleep(1) is None and log_lines() == n and n,
        20,
        message="the hung pod's log to stop growing",
    )
    assert 0 < stopped < 600
    assert api.read_namespaced_pod("stuck", "default").status.phase == "Running"
    api.delete_namespaced_pod("stuck", "default")  # a deletion still ends it (SIGKILL after the grace)
    wait_until(lambda: [p["metadata"]["name"] for p in prog.pods()] == ["eater-1"], 30, message="the hung pod to go")
