"""What a backend gives the entrypoint: the environment variables below.

Every backend starts the entrypoint once per node rank (`python -m launcher.entrypoint`,
or the zipapp of it: launcher.pod.zipapp) with:

    LAUNCHER_PLAN          path of the run's plan (launcher.pod.plan: JSON, secret-free)
    LAUNCHER_SPEC          path of the submitted spec (JSON or YAML, secret-free); read
                           only without LAUNCHER_PLAN, where the spec models are installed
    LAUNCHER_BACKEND       the backend's name, for messages; nothing branches on it
    LAUNCHER_ON_HOST       "1" where the ranks are processes of the launcher's own machine,
                           in its Python environment (the local backend); absent: each rank
                           is a pod of its own. See on_host() for what it changes
    LAUNCHER_CONFIG_DIR    where parameters.yaml is (or is to be written); default /mnt/config
    LAUNCHER_WORKDIR       the working directory for integrations and the command; default cwd
    NODE_RANK              this node's rank (Kubernetes: from the job-completion index;
                           JOB_COMPLETION_INDEX is read when NODE_RANK is absent)
    LAUNCHER_NODES         number of nodes
    LAUNCHER_GPUS_PER_NODE GPUs per node (0 or unset: CPU, one process per node)
    MASTER_ADDR, MASTER_PORT   rank 0's address (local: 127.0.0.1 and a free port)
    LAUNCHER_MASK_ENV      comma-separated names of env vars holding secret values
    LAUNCHER_MASK_FILES    os.pathsep-separated paths of secret files
    LAUNCHER_VENV          (local) where the run's virtualenv goes
    LAUNCHER_ARTIFACTS_DIR (optional) where the run's artifacts go, e.g. metrics.jsonl
    LAUNCHER_ATTEMPT       which attempt of the run this is (1, 2, ... after retries); on
                           Kubernetes, the first attempt of the run's JobSet (1, or N+1 after
                           a `run -r`), to which LAUNCHER_RESTART_ATTEMPT adds
    LAUNCHER_RESTART_ATTEMPT  (Kubernetes) the JobSet's restart count from the pod's
                           jobset.sigs.k8s.io/restart-attempt label (attempt_number adds them)
    LAUNCHER_FREE_RESTARTS (Kubernetes, with retry_on_system_failure) the JobSet restart count
                           from which a failure of a system class ends with EXIT_SYSTEM_COUNTED,
                           which counts against max_retries: JobSet has no cap on free restarts
    LAUNCHER_RUNTIME       (inject mode) where the injected runtime lies (/launcher); the
                           command then runs in the image's own environment, not ours
    LAUNCHER_IMAGE         (inject and zipapp modes) the user's image, named in setup errors
    LAUNCHER_EXIT_FILE     (optional) where to write this rank's outcome as JSON when it ends:
                           {"exit_code": N, "reason": "..." or null, "evidence": {class: the
                           first line of the command's output that is evidence of it}
                           (launcher.pod.failures), "progress": {"step": N or null,
                           "age": seconds since the last progress or null},
                           "setup": seconds from the entrypoint's start to the command's,
                           "resumed": {"path", "step"} of the checkpoint a retried attempt
                           resumes from (LAUNCHER_RESUME_FROM), where one was found}. Its space is reserved
                           when the entrypoint starts, so it is written even on a full disk.
    LAUNCHER_PROGRESS_FILE (optional; local) where the entrypoint keeps, while the command
                           runs, the rank's last step and its step time (JSON: {"step": N,
                           "step_seconds": median of its last 20 steps, "steps_timed": how
                           many}), which the backend compares across ranks (stragglers).
                           Where the rank runs in a container (the kubelet made
                           /dev/termination-log), the entrypoint also leaves that as the
                           last line of its termination message (launcher.pod.stragglers),
                           after a failed rank's `CLASS: evidence` (launcher.pod.failures)
    LAUNCHER_PROGRESS_PORT (optional; where the ranks are on different nodes) the TCP port
                           of the progress channel (launcher.entrypoint.progress): every
                           rank > 0 sends its step time there, to MASTER_ADDR, every few
                           seconds, and rank 0 names the stragglers while they run. Not
                           MASTER_PORT, which is the command's own while it runs
    LAUNCHER_RANK_HOSTS    (with LAUNCHER_PROGRESS_PORT) where each node rank's pod is, a
                           host name with {rank} in it (Kubernetes: the pods' DNS names
                           under the run's headless Service); rank 0 takes reports only
                           from the addresses these resolve to
    LAUNCHER_NODE_NAME     (optional) the node this rank runs on (Kubernetes: the pod's
                           spec.nodeName), named with a straggler
    LAUNCHER_EXEC_RECORD   (optional; local) where to write, as the command starts, its
                           environment, working directory and the entrypoint's pid (JSON,
                           0600: it holds the run's secrets), which `launcher exec` runs with
    LAUNCHER_OWNER         (optional) a token naming the run; every process of the rank
                           inherits it, so a backend finds them all through /proc
    LAUNCHER_LOG_ARCHIVE   (optional; Kubernetes with a log_store) where the rank also
                           archives its masked log, in chunks (launcher.pod.logarchive)
    LAUNCHER_ALLOW_HOST_PACKAGES  (local) "1" when the profile allows apt_packages to be
                           installed on this machine; without it the local backend refuses them

Optional knobs, read from the same environment:

    LAUNCHER_RENDEZVOUS_TIMEOUT  seconds a node rank > 0 waits for rank 0's
                           MASTER_ADDR to resolve in DNS (default 600; not on the local backend)
    LAUNCHER_PREFLIGHT_TIMEOUT  seconds the health gate (resilience.preflight) gives all
                           ranks to check in (default 60; launcher.entrypoint.preflight)
    LAUNCHER_GRACE_SECONDS seconds between passing on SIGTERM/SIGINT to the command's
                           process group and SIGKILL (default 30). The command runs in
                           its own process group, which a signal to the entrypoint's
                           group does not reach: a backend stops a rank by signalling
                           the entrypoint, and waits longer than this before SIGKILL
                           (Kubernetes: terminationGracePeriodSeconds).

Secrets are already in the environment (env kinds) or on disk (file kinds) when
the entrypoint starts; it never receives a value through its arguments. For
https clones the git_repo integration reads a token from GITHUB_TOKEN or GH_TOKEN
(hosts with "github" in the name), GITLAB_TOKEN (hosts with "gitlab"), else
GIT_TOKEN; GIT_USERNAME overrides the user name sent with it.

Where LAUNCHER_ON_HOST is "1" the ranks of a run share one machine: the integrations
run once per run, by whichever rank takes the lock in LAUNCHER_CONFIG_DIR first; the
other ranks wait for it and reuse the result.
"""

from __future__ import annotations

from collections.abc import Mapping

PLAN = "LAUNCHER_PLAN"
SPEC = "LAUNCHER_SPEC"
BACKEND = "LAUNCHER_BACKEND"
CONFIG_DIR = "LAUNCHER_CONFIG_DIR"
WORKDIR = "LAUNCHER_WORKDIR"
NODES = "LAUNCHER_NODES"
GPUS_PER_NODE = "LAUNCHER_GPUS_PER_NODE"
MASK_ENV = "LAUNCHER_MASK_ENV"
MASK_FILES = "LAUNCHER_MASK_FILES"
VENV = "LAUNCHER_VENV"
ARTIFACTS_DIR = "LAUNCHER_ARTIFACTS_DIR"
CACHE_DIR = "LAUNCHER_CACHE_DIR"  # where a run's caches go (a pod's emptyDir); see train/cache.py
ATTEMPT = "LAUNCHER_ATTEMPT"
RESTART_ATTEMPT = "LAUNCHER_RESTART_ATTEMPT"
FREE_RESTARTS = "LAUNCHER_FREE_RESTARTS"
RUNTIME = "LAUNCHER_RUNTIME"
IMAGE = "LAUNCHER_IMAGE"
EXIT_FILE = "LAUNCHER_EXIT_FILE"
# Where the entrypoint writes the command's environment, working directory and its own pid
# (JSON, mode 0600, secrets included: the rank's own data), for `launcher exec` on the local backend.
EXEC_RECORD = "LAUNCHER_EXEC_RECORD"
PROGRESS_FILE = "LAUNCHER_PROGRESS_FILE"
PROGRESS_PORT = "LAUNCHER_PROGRESS_PORT"
RANK_HOSTS = "LAUNCHER_RANK_HOSTS"
NODE_NAME = "LAUNCHER_NODE_NAME"
STEP_WINDOW = 20
"""Steps a rank's step time is the median of; a rank slower than straggler_factor × the
others' for that many steps is a straggler."""
OWNER = "LAUNCHER_OWNER"
ALLOW_HOST_PACKAGES = "LAUNCHER_ALLOW_HOST_PACKAGES"
RENDEZVOUS_TIMEOUT = "LAUNCHER_RENDEZVOUS_TIMEOUT"
GRACE_SECONDS = "LAUNCHER_GRACE_SECONDS"
PREFLIGHT_TIMEOUT = "LAUNCHER_PREFLIGHT_TIMEOUT"
DEFAULT_GRACE_SECONDS = 30.0
ON_HOST = "LAUNCHER_ON_HOST"
DEFAULT_CONFIG_DIR = "/mnt/config"


def on_host(env) -> bool:
    """Whether the ranks run on the launcher's own machine (LAUNCHER_ON_HOST): then they use
    its Python environment (not the image), share its working directory (the integrations run
    once per run), reach rank 0 at 127.0.0.1 (no DNS wait), keep caches beside the run's
    artifacts, and may get fewer GPUs than the spec asks (the entrypoint says so)."""
    return env.get(ON_HOST) == "1"


# Exit codes of the entrypoint's own failures, distinct from common command codes.
EXIT_SPEC = 64  # the spec could not be read
EXIT_INTEGRATION = 65  # an integration step (git, pip, apt) failed
EXIT_RENDEZVOUS = 66  # rank 0's address never resolved
EXIT_SETUP = 67  # parameters or environment could not be prepared
EXIT_LOGS = 68  # the command's output could not be written (a full disk)
EXIT_HANG = 69  # no progress for resilience.hang_timeout: the entrypoint ended the command (launcher.pod.failures)
# A failure of a system class (launcher.spec.retry.SYSTEM) that the entrypoint tells ends the
# rank with its class's code: the health gate's verdict, and in a container (Kubernetes) a
# command that failed with the class's evidence in its log (its own code stays in the log and
# the termination message). A Job's podFailurePolicy sees exit codes only: the run's
# failurePolicy restarts these as the system's (launcher.backends.kubernetes.render).
EXIT_HARDWARE = 70  # a GPU Xid, an ECC error, a device that vanished, a failed device check (launcher.pod.failures)
EXIT_COLLECTIVE = 71  # an NCCL or gloo timeout or abort, ranks that could not meet (launcher.pod.failures)
# A rank stayed a straggler for resilience.straggler_grace, with resilience.exclude_faulty_nodes
# (launcher.entrypoint.progress): rank 0 told it so, and it ended its command: a fault of its
# own node (`hardware`), whose pod is then the one that failed (the Job's failure event names
# it, and after a JobSet restart its Scheduled event still gives its node).
EXIT_STRAGGLER = 72
# Rank 0 ended the attempt itself: the straggler could not be told, or did not end within
# progress.TOLD_SECONDS of being told. `hardware`, but the failed pod is rank 0's: only the
# straggler its termination message names is pinned, never rank 0's own node.
EXIT_STRAGGLER_PEER = 74
SYSTEM_EXIT_CODES = (EXIT_HANG, EXIT_HARDWARE, EXIT_COLLECTIVE, EXIT_STRAGGLER, EXIT_STRAGGLER_PEER)
"""The entrypoint's exit codes for a failure of the system's class (launcher.spec.retry.SYSTEM)."""
# A failure of a system class once the JobSet has restarted FREE_RESTARTS times: past the
# most free restarts a run may have had (max_retries counted + launcher.spec.retry's cap on
# free ones), so from there each counts against maxRestarts and a bad node cannot loop forever.
EXIT_SYSTEM_COUNTED = 73

MAX_ARG_STRLEN = 128 * 1024
"""The most bytes one string of a rank's argv or environment may have, its NUL included
(for an env var: NAME=VALUE and the NUL). It is Linux's MAX_ARG_STRLEN, 32 pages of 4 KiB
(more where pages are larger): past it, exec fails with "Argument list too long", in a pod
as on this machine. An env secret is checked against it when it is created."""

METRIC_PREFIX = "@@launcher.metrics "
"""What starts each metric record a trainer prints to its rank's log (the format is in
launcher.metrics.records). It is the metrics channel between the pod and the host's
readers: `launcher metrics` reads those lines, and the log views hide them
(launcher.sdk.logview)."""


def past_free_restarts(env: Mapping[str, str]) -> bool:
    """Has this rank's JobSet restarted FREE_RESTARTS times or more (where it says a cap)?"""
    cap = env.get(FREE_RESTARTS)
    return bool(cap) and int(env.get(RESTART_ATTEMPT) or 0) >= int(cap or 0)


def attempt_number(env: Mapping[str, str]) -> int:
    """This rank's attempt: LAUNCHER_ATTEMPT, plus the JobSet's restart count where a JobSet
    runs it. A value that is not a number is the backend's bug: ValueError, not a guess."""
    return int(env.get(ATTEMPT) or 1) + int(env.get(RESTART_ATTEMPT) or 0)
