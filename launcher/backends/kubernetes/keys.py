"""Label and annotation names the Kubernetes backend writes and reads."""

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "launcher"
RUN = "launcher.dev/run"
ATTEMPT = "launcher.dev/attempt"  # on a JobSet, its Jobs and pods: its first attempt (1, or N+1 after `run -r`)
SUBMISSION = "launcher.dev/submission"  # one submission's uid: a retried create finds its own object
SECRET_KIND = "launcher.dev/secret-kind"
SECRET_OPTIONS = "launcher.dev/secret-options"

# On the ConfigMap, the run's durable record (see backend.py).
RECORD_SECRETS = "launcher.dev/secrets"  # JSON [{name, kind, options, keys}]: no values
RECORD_ATTEMPTS = "launcher.dev/attempts"  # JSON list of finished attempts
RECORD_FINAL = "launcher.dev/final"  # JSON {status, reason, at}: ended by the launcher, or seen ending before a TTL
RECORD_RESTARTED = "launcher.dev/restarted"  # the attempt a user's restart (`run -r`) began: retries count from it
# JSON [{node, class, evidence, attempt}]: the nodes the current JobSet's pods keep off (a restart
# after a hardware or collective failure there; resilience.exclude_faulty_nodes).
RECORD_EXCLUDED = "launcher.dev/excluded-nodes"
RECORD_LOG_ARCHIVE = "launcher.dev/log-archive"  # the run's directory in the profile's log_store
RECORD_LOG_ARCHIVE_SECRET = "launcher.dev/log-archive-secret"  # the secret its credentials come from
# The JobSet's ttlSecondsAfterFinished, where the profile sets one: the record is then not owned
# by the JobSet, so that it outlives the cluster's deletion of the finished JobSet.
RECORD_TTL = "launcher.dev/ttl-seconds-after-finished"

METADATA_PREFIX = "metadata.launcher.dev"  # the spec's metadata keys, as annotations

# Set by the JobSet controller on child Jobs and pods: the JobSet's restart count (0, 1, ...).
JOBSET_RESTART = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"  # on a Workload: the uid of the Job or JobSet it admits
# On a pod template: the node label whose one domain must (or should) hold every pod of the pod set.
KUEUE_TOPOLOGY = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
}

CONTAINER = "main"
CONFIG_MOUNT = "/mnt/config"
CODE_MOUNT = "/mnt/code"
"""Where a run's code snapshot (its ConfigMap or Secret <run>-code) is mounted."""
# The pod's scratch volume for the run's caches (streaming shards, prepared datasets): an
# emptyDir, so it is node-local disk outside the image's writable layer and goes with the pod.
CACHE_VOLUME = "launcher-cache"
CACHE_MOUNT = "/tmp/launcher-cache"
SPEC_FILE = "spec.json"
PARAMETERS_FILE = "parameters.yaml"
RUN_CONFIG_FILE = "run_config.yaml"


def run_selector(name: str) -> str:
    return f"{RUN}={name}"


MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"


CODE_OF = "launcher.dev/code-of"
"""The label of a run's code snapshot object: not the run's own labels, which mark its record
and its pods (observe_all takes every ConfigMap with them for a record)."""


LOGS_OF = "launcher.dev/logs-of"
"""The label of a stopped attempt's kept log (keptlogs.py), as CODE_OF marks the code snapshot."""


def code_object_name(run: str) -> str:
    """The ConfigMap or Secret that carries a run's code snapshot."""
    return f"{run}-code"


SECRETS_OF = "launcher.dev/secrets-of"
"""The label of a run's own Secret (run_secret_name), as CODE_OF marks the code snapshot."""
RUN_SECRET_MOUNT = "/mnt/secrets"
"""Where a run rendered without its secrets' kinds (an offline dry-run) mounts its own Secret."""


def run_secret_name(run: str) -> str:
    """The Secret an offline dry-run's pods take every secret of the run from (envFrom and a
    volume, neither optional), which `launcher secret bundle` creates from the stored ones."""
    return f"{run}-secrets"
