"""What both sides of the pod boundary share: the host (a backend, which starts a rank)
and the in-container program (launcher.entrypoint, which is the rank).

- contract: the environment a backend gives the entrypoint, and the entrypoint's exit codes;
- reaper: finding and killing every process of a rank (the entrypoint reaps its command's
  tree; the local backend's supervisor finds a rank's leftovers);
- packages: the rule on system packages that the local backend checks before it starts a
  run and the entrypoint applies when it would install them;
- plan: the JSON plan of a run that the host writes and the entrypoint reads;
- limits: what a Linux exec takes of a rank's command and environment (ARG_MAX), which
  the host checks a run against before it starts;
- zipapp: the entrypoint as a zipapp, and the sh shim that runs it with an image's python3;
- backoff: the one backoff (a wait doubling up to a cap) of the host's API client, the
  retry policy, and the entrypoint's rendezvous.

A local rank is a pod without a container: the same contract holds there. This package
imports nothing else of the launcher, so both sides may import it, and the runtime
injected into a pod (launcher.entrypoint.bundle) and the zipapp carry it with the entrypoint.
Like the entrypoint, it needs the standard library only, of Python 3.8 or newer.
"""
