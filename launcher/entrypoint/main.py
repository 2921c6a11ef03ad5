"""The program every rank of every run starts: `python -m launcher.entrypoint`, or the
zipapp of it that a Kubernetes pod runs with the image's own python3 (launcher.pod.zipapp).

It needs the standard library only (Python 3.8 or newer): what it runs comes as a plain
JSON plan the host wrote from the validated spec (launcher.pod.plan).

In order, with a log line for each step:
1. read the plan ($LAUNCHER_PLAN; or the submitted spec $LAUNCHER_SPEC, where the spec
   models are importable: the image and inject modes);
2. lay the code snapshot over the working directory (launcher.entrypoint.code), and run the
   integrations (git clones, pip and apt installs), in YAML order;
3. write parameters.yaml and export PARAMETERS;
4. set the environment: the run's variables, the rank variables for composer and
   torchrun, PYTHONUNBUFFERED (the integrations already see the run's variables:
   a PIP_INDEX_URL in env_variables applies to pip_packages, as in mcli);
5. on node ranks > 0 (Kubernetes), wait until rank 0's MASTER_ADDR resolves;
6. run the command with bash in the working directory, masking secret values in
   its output and passing stop signals on to its whole process group.

It exits with the command's exit code (128+N when a signal N ended it), or with
one of contract.EXIT_* when a step before the command failed or its output could
not be written, prints a final line with the exit code and the duration, and
writes the outcome to $LAUNCHER_EXIT_FILE when the backend asks for it.
"""

from __future__ import annotations

import errno
import os
import platform
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from launcher.entrypoint import log as out
from launcher.entrypoint import runtime, supervise
from launcher.entrypoint.log import log, set_masker
from launcher.entrypoint.ranks import rank_env
from launcher.entrypoint.venv import use_current_environment
from launcher.entrypoint.watch import Watch
from launcher.pod import contract
from launcher.pod.plan import RankPlan
from launcher.pod.plan import read as read_plan_file
from launcher.pod.reserved import ReservedFile
from launcher.secrets.mask import MIN_MASK_LEN, too_short_to_mask


def read_plan(env: dict[str, str]) -> tuple[RankPlan, str]:
    """The rank's plan and the file it came from: $LAUNCHER_PLAN, else the spec."""
    if env.get(contract.PLAN):
        return read_plan_file(env[contract.PLAN]), env[contract.PLAN]
    from launcher.spec.plan import plan_of_spec_file  # the spec models: not in the zipapp

    return plan_of_spec_file(env[contract.SPEC]), env[contract.SPEC]


def write_parameters(plan: RankPlan, config_dir: Path) -> Path:
    """Write parameters.yaml unless the backend already placed it (a read-only ConfigMap)."""
    target = config_dir / "parameters.yaml"
    if plan.parameters is None:  # the plan says the backend placed it
        if not target.is_file():
            raise FileNotFoundError(errno.ENOENT, "the plan says the backend placed it, but it is missing", str(target))
        return target
    try:
        if target.read_text() == plan.parameters:
            return target
    except (OSError, UnicodeDecodeError):
        pass
    config_dir.mkdir(parents=True, exist_ok=True)
    # A unique temporary name: the ranks of a local run write the same file at once.
    fd, tmp = tempfile.mkstemp(dir=config_dir, prefix=".parameters.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(plan.parameters)
    os.replace(tmp, target)
    return target


class ExitFile:
    """The rank's outcome for the backend, in a file whose space is taken at the start
    (launcher.pod.reserved), so a disk that fills up meanwhile cannot keep it from being
    written."""

    def __init__(self, path: str | None):
        self.file = ReservedFile(path)

    def write(
        self, code: int, reason: str | None, watch=None, setup: float | None = None, resumed: dict | None = None
    ) -> None:
        outcome: dict = {"exit_code": code, "reason": reason}
        if resumed is not None:  # the checkpoint this attempt resumed from (launcher.entrypoint.resume)
            outcome["resumed"] = resumed
        if setup is not None:  # seconds before the command started: setup, not work (goodput)
            outcome["setup"] = round(setup, 3)
        if watch is not None:  # what the watch saw (launcher.entrypoint.watch)
            outcome["evidence"] = dict(watch.evidence.lines)
            age = watch.progress_age()
            outcome["progress"] = {"step": watch.step, "age": None if age is None else round(age, 3)}
        error = self.file.write(outcome)
        if error is not None:
            log(f"error: cannot write the exit file {self.file.path}: {error.strerror or error}")


def log_failure_reason() -> str | None:
    """Why the command's output did not all reach the log, if it did not."""
    failed = out.write_error()
    if failed is None:
        return None
    error, lost = failed
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        target = ""
    where = os.path.dirname(target) if target.startswith("/") else "stdout"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full writing logs under {where} ({lost} bytes of output lost)"
    return f"cannot write logs under {where}: {error.strerror or error} ({lost} bytes of output lost)"


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    supervise.install_signal_handlers()
    sys.stderr = out.MaskedStderr()
    exit_file = ExitFile(os.environ.get(contract.EXIT_FILE))
    timing: dict[str, float] = {}
    watching: dict = {}  # _main leaves the command's watch here ("watch"), a failed gate's reason ("verdict")
    archive = None
    try:
        # The run's secret values are masked in every line from here on, this one's errors too.
        set_masker(supervise.masker_from_env(dict(os.environ)))
        archive = start_archive(dict(os.environ))
        timing["entrypoint_start"] = started
        code = _main(timing, watching)
        supervise.finish()
    except supervise.Stopped as e:
        supervise.finish()
        log(f"stopped by {signal.Signals(e.signum).name} before the command started")
        code = e.exit_code
    except Exception as e:  # noqa: BLE001 - a bug ends the rank with its exit code and these lines
        supervise.finish()
        # In a pod the rank's log is the only record of the bug: its traceback goes there,
        # masked like every line, before the one-line summary.
        log("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip("\n"))
        log(f"error: the entrypoint failed: {type(e).__name__}: {e}")
        code = contract.EXIT_SETUP
    late = supervise.late_signal()
    if late is not None:
        after = (
            "after the command had exited; its exit code stands"
            if "command" in timing
            else "while ending; the exit code stands"
        )
        log(f"received {signal.Signals(late).name} {after}")
    reason = log_failure_reason()
    watch = watching.get("watch")
    if reason:
        log(f"error: {reason}")
        code = contract.EXIT_LOGS
    elif watching.get("verdict"):  # the health gate failed: its class and why
        reason = watching["verdict"]
    elif watch is not None and watch.hung:
        reason = f"hang: {watch.hung}"
        code = contract.EXIT_HANG
    elif watch is not None and watch.straggler:  # a straggler's node fault (launcher.entrypoint.progress)
        reason, code = watch.straggler
    setup = timing["command_start"] - started if "command_start" in timing else time.monotonic() - started
    if watch is not None or watching.get("verdict"):
        code = leave_termination_message(code, reason, watch, watching.get("resumed"), setup)
    if code in contract.SYSTEM_EXIT_CODES and contract.past_free_restarts(os.environ):
        log(
            f"exit code {contract.EXIT_SYSTEM_COUNTED} for {code}: the JobSet has restarted "
            f"{os.environ.get(contract.RESTART_ATTEMPT)} times, past the free restarts a run may have "
            f"({contract.FREE_RESTARTS}={os.environ.get(contract.FREE_RESTARTS)}), so this failure counts "
            "against max_retries"
        )
        code = contract.EXIT_SYSTEM_COUNTED
    total = time.monotonic() - started
    if "command" in timing:
        log(f"exit code {code}: the command ran {timing['command']:.1f}s, {total:.1f}s in all")
    else:
        log(f"exit code {code} after {total:.1f}s")
    if archive is not None:
        out.set_archive(None)
        if not archive.close():
            log("log archive: the last chunks were not written in time; the pod log has them")
    exit_file.write(code, reason, watch, setup, watching.get("resumed"))
    return code


def leave_termination_message(
    code: int, reason: str | None, watch, resumed: dict | None = None, setup: float | None = None
) -> int:
    """In a container, leave as the pod's termination message, which its status carries
    back (4 KiB at most), what the host would otherwise have to read the log for: a failed
    rank's `CLASS: evidence` (launcher.pod.failures), on rank 0 the lines naming the
    stragglers it saw while the ranks ran (launcher.entrypoint.progress; on a straggler rank 0
    told to end, the line naming it: rank 0's pod goes when the Job fails), the rank's step
    time as a last line (launcher.pod.stragglers), which the host compares across ranks, and
    the checkpoint a retried attempt resumed from (launcher.pod.resumed), for describe. The
    exit code to end with: there, a command's failure of a system class ends the rank with
    that class's code (contract.SYSTEM_EXIT_CODES), the only thing the Job's podFailurePolicy
    can tell."""
    from launcher.entrypoint.runtime import TERMINATION_LOG, TERMINATION_MESSAGE_BYTES
    from launcher.pod import stragglers
    from launcher.pod.failures import COLLECTIVE, HARDWARE, USER, classify
    from launcher.pod.resumed import termination_line as resumed_line

    if not TERMINATION_LOG.exists():  # only inside a container: the kubelet creates it
        return code
    texts = []
    failure = classify(code, reason, list(watch.evidence.lines.values()) if watch is not None else [])
    system_code = {HARDWARE: contract.EXIT_HARDWARE, COLLECTIVE: contract.EXIT_COLLECTIVE}.get(failure.kind)
    if code != 0 and system_code is not None and not contract.EXIT_SPEC <= code <= contract.EXIT_STRAGGLER_PEER:
        log(
            f"exit code {system_code} for the command's {code}: a {failure.kind} failure, which the run's "
            "failurePolicy counts as the system's (free with scheduling.retry_on_system_failure)"
        )
        code = system_code
    # A plain user failure leaves no class: the exit code says it all (`exited with code N`).
    if code != 0 and failure.kind != USER:
        text = failure.evidence or ""
        if not text.startswith(f"{failure.kind}: "):
            text = f"{failure.kind}: {text}" if text else failure.kind
        texts.append(out.mask(text))
    if resumed is not None:
        texts.append(out.mask(resumed_line(resumed)))
    if watch is not None and watch.peers is not None:  # the stragglers rank 0 named live
        texts += [out.mask(line) for line in watch.peers.lines()]
    # The rank's progress for the host: its step time (stragglers), how long ago its last
    # progress came and its setup (goodput: what a failure lost, what was not work).
    progress: dict = {}
    if watch is not None:
        age = watch.progress_age()
        progress = {**watch.progress(), "age": None if age is None else round(age, 3)}
        seconds = progress["step_seconds"]
        if seconds is not None:
            progress["step_seconds"] = round(seconds, 6)
            log(
                f"progress: {seconds:.3f} s a step (the median of its last {len(watch.step_times)}), left for the "
                "host to compare with the other ranks' (resilience.straggler_factor)"
            )
    if setup is not None:
        progress["setup"] = round(setup, 3)
    if progress:
        texts.append(stragglers.termination_line(progress))
    # What the command left there itself (an app's own reason) stays, after ours: the kubelet
    # keeps the first 4 KiB.
    try:
        own = TERMINATION_LOG.read_text(errors="replace")[:TERMINATION_MESSAGE_BYTES].strip("\n")
    except OSError:
        own = ""
    if own:
        texts.append(out.mask(own))
    if texts:
        try:
            TERMINATION_LOG.write_text("\n".join(texts) + "\n")
        except OSError:
            pass
    return code


def start_archive(env: dict[str, str]):
    """Archive this rank's log where the backend asks (LAUNCHER_LOG_ARCHIVE); a store that
    cannot be opened is said in the log and the run goes on without it."""
    from launcher.pod.logarchive import LOG_ARCHIVE, pod_store_problem

    if not env.get(LOG_ARCHIVE):
        return None
    problem = pod_store_problem(env[LOG_ARCHIVE])
    if problem:  # the host refuses such a log_store before a run; a pod may still get one
        log(f"log archive: {problem}; this rank's log is not archived")
        return None
    from launcher.entrypoint.archive import open_archive

    rank = env.get("NODE_RANK") or env.get("JOB_COMPLETION_INDEX") or "0"
    attempt = contract.attempt_number(env)
    try:
        archive = open_archive(env, attempt, int(rank), on_error=log)
    except Exception as e:  # noqa: BLE001 - the log itself still works
        log(
            f"log archive: cannot open {env[LOG_ARCHIVE]}: {getattr(e, 'message', None) or e}; "
            "this rank's log is not archived"
        )
        return None
    out.set_archive(archive)
    return archive


def _main(timing: dict[str, float], watching: dict) -> int:
    if not os.environ.get(contract.PLAN) and not os.environ.get(contract.SPEC):
        log(f"error: neither {contract.PLAN} nor {contract.SPEC} is set; the backend must say where the run's plan is")
        return contract.EXIT_SPEC
    try:
        plan, plan_path = read_plan(dict(os.environ))
    except Exception as e:  # noqa: BLE001 - any failure here is a bad plan or spec file
        which = (
            f"the run's plan {os.environ[contract.PLAN]}"
            if os.environ.get(contract.PLAN)
            else f"the submitted spec {os.environ[contract.SPEC]}"
        )
        log(f"error: cannot read {which}: {type(e).__name__}: {e}")
        return contract.EXIT_SPEC

    env = dict(os.environ)
    workdir = Path(env.get(contract.WORKDIR) or os.getcwd())
    log(f"run {plan.name}: plan {plan_path}, working directory {workdir}")
    if sys.argv and sys.argv[0].endswith(".pyz"):  # zipapp mode: the image's own interpreter
        flags = "".join([", isolated" if sys.flags.isolated else "", ", no site-packages" if sys.flags.no_site else ""])
        log(f"entrypoint {sys.argv[0]} run by {sys.executable} (Python {platform.python_version()}{flags})")
    if runtime.injected(env):
        code = runtime.prepare(env)
        if code:
            return code
    if contract.on_host(env):
        image = f"; image {plan.image} is not used" if plan.image else ""
        log(f"note: the local backend runs with the current Python environment ({sys.executable}){image}")
        use_current_environment(env)

    env.update(plan.env)
    env["PYTHONUNBUFFERED"] = "1"
    try:
        env.update(rank_env(plan, env))
    except ValueError as e:
        log(f"error: bad rank environment from the backend: {e}")
        return contract.EXIT_SETUP

    if plan.integrations or plan.code:
        from launcher.entrypoint.integrations import run_integrations

        code = run_integrations(plan, workdir, env)
        if code:
            return code

    try:
        params = write_parameters(plan, Path(env.get(contract.CONFIG_DIR) or contract.DEFAULT_CONFIG_DIR))
    except OSError as e:
        log(f"error: cannot write the parameters file: {e}")
        return contract.EXIT_SETUP
    env["PARAMETERS"] = str(params)
    log(f"parameters: {params} (PARAMETERS)")

    secrets = [n for n in env.get(contract.MASK_ENV, "").split(",") if n and n in env]
    short = sorted(n for n in secrets if too_short_to_mask(env[n]))
    names = sorted(plan.env_variables)
    log(
        "environment: RUN_NAME"
        + (", DATA_REMOTE" if "DATA_REMOTE" in env else "")
        + (", DATA_LOCAL" if "DATA_LOCAL" in env else "")
        + (f"; env_variables {', '.join(names)}" if names else "")
        + (f"; secrets {', '.join(sorted(secrets))} (masked in this log)" if secrets else "")
    )
    if short:
        log(
            f"warning: secret(s) {', '.join(short)} are shorter than {MIN_MASK_LEN} characters: "
            "too short to be masked in logs"
        )
    _note_missing_gpus(plan, env)
    log(
        f"node rank {env['NODE_RANK']} of {env['PET_NNODES']}, {env['LOCAL_WORLD_SIZE']} process(es) per node, "
        f"WORLD_SIZE {env['WORLD_SIZE']}, master {env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    )

    if int(env["NODE_RANK"]) > 0 and not contract.on_host(env):
        from launcher.entrypoint.rendezvous import wait_for_rank0

        code = wait_for_rank0(env)
        if code:
            return code

    if plan.resilience.checkpoints:
        from launcher.entrypoint.resume import resume

        # The pod's own environment: env's LAUNCHER_ATTEMPT already has the JobSet's restarts added (rank_env).
        attempt = contract.attempt_number(os.environ)
        watching["resumed"] = resume(env, plan.resilience.checkpoints, attempt, workdir)
    if plan.resilience.preflight:
        from launcher.entrypoint.preflight import gate

        failed = gate(env, str(workdir))
        if failed is not None:
            watching["verdict"] = failed[1]
            from launcher.pod.failures import HARDWARE

            return contract.EXIT_HARDWARE if failed[0] == HARDWARE else contract.EXIT_COLLECTIVE
    watch = watching["watch"] = Watch(plan.resilience.hang_timeout, progress_file=env.get(contract.PROGRESS_FILE))
    watch.prepare(env)
    from launcher.entrypoint.progress import open_channel

    watch.peers = open_channel(env, plan.resilience, time.monotonic() - timing["entrypoint_start"])
    if plan.resilience.hang_timeout is not None:
        log(
            f"watching progress: a hang is no metric record or heartbeat for {plan.resilience.hang_timeout:g} s "
            "(resilience.hang_timeout), once the first has come"
        )
    write_exec_record(env, workdir)
    log(f"running the command with bash in {workdir}")
    began = timing["command_start"] = time.monotonic()
    try:
        code = supervise.run(["bash", "-c", plan.command], cwd=workdir, env=env, final=True, watch=watch)
    except OSError as e:
        log(f"error: cannot start bash in {workdir}: {e.strerror or e}")
        return contract.EXIT_SETUP
    timing["command"] = time.monotonic() - began
    return code


def write_exec_record(env: dict[str, str], workdir: Path) -> None:
    """Leave the command's environment and working directory where the backend asks
    (EXEC_RECORD), so that `launcher exec` runs in the same; 0600 from its creation, since
    it holds the run's secret values, as the rank's own environment does."""
    path = env.get(contract.EXEC_RECORD)
    if not path:
        return
    import json

    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"env": env, "cwd": str(workdir), "pid": os.getpid()}, f)
        os.replace(tmp, path)
    except OSError as e:  # the run goes on; only exec cannot find it
        log(f"note: cannot write the exec record {path}: {e.strerror or e}; `launcher exec` cannot enter this rank")


def _note_missing_gpus(plan, env: dict[str, str]) -> None:
    wanted = plan.gpus // max(1, plan.nodes)
    given = int(env.get(contract.GPUS_PER_NODE) or 0)
    if contract.on_host(env) and wanted > given:
        log(
            f"note: the spec asks for {wanted} GPU(s) per node; this machine gives {given}"
            + (": running on CPU" if not given else "")
        )


if __name__ == "__main__":
    sys.exit(main())
