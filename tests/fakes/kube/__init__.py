"""A fake Kubernetes cluster for tests: an API server on 127.0.0.1 that the real
`kubernetes` client and real kubectl talk to, with a control plane and a kubelet that
runs pods as local processes.

Modules, one job each:
  common      clocks, the API's error shape, merge patch, selectors
  resources   the served resources (kind, plural, group/version, scope, short names)
  store       objects, resourceVersions, bounded watch history (410 Gone), deletion and GC
  validation  the server-side validation a real API server does
  podsecurity Pod Security admission: a namespace's pod-security.kubernetes.io/enforce level
  jobs        the Job controller (Indexed/NonIndexed, podFailurePolicy, backoffLimit)
  jobset      the JobSet controller (jobset.x-k8s.io/v1alpha2) and CRD schema validation
  kueue_api   Kueue's API (kueue.x-k8s.io v1beta2 stored, v1beta1 converted) from its CRDs
  kueue       Kueue simulated: Workloads, admission, preemption, topology, visibility API
  scheduler   binds pods to fake nodes, or says why not
  kubelet     runs containers (init containers, volumes, private mounts, image map)
  http        REST routing, watch, logs; discovery and tables print for kubectl
  streams     pods/exec and pods/portforward over WebSocket (v5/v4 channel protocols)
  faults      scripted trouble; admin and client expose it over HTTP
  cluster     FakeKube: all of the above in this process
  program     the same as a program; fixtures holds the pytest fixtures

In-process use (pytest fixtures `fake_kube`, `fake_kube_factory`):

    kube = FakeKube(nodes=None, jobset=True, images={"mosaicml/pytorch:*": "/path/to/image"},
                    isolate=None, history_limit=10_000, log_resolution_ns=1_000).start()
    kube.write_kubeconfig(path); kube.url; kube.close()
    kube.get/list/create/patch/replace/delete/update(kind, namespace, ...)
    kube.pods(ns, labels); kube.count(method=, kind=, verb=); kube.requests; kube.lists
    kube.evict(pod_name)        # DisruptionTarget condition, then SIGKILL (exit 137)
    kube.compact()              # drop the watch history: older versions get 410 Gone
    kube.containers[pod_uid].lines   # [(timestamp_ns, text)] of the pod's first container

As a program (fixture `fake_kube_program`, which starts it with a bounded startup wait
and always stops it):

    python tests/fakes/kube_api.py --kubeconfig PATH [--nodes N --gpus-per-node G]
        [--node-label K=V] [--no-jobset] [--image REF_GLOB=DIR] [--no-isolation]
        [--exit-with-parent] [--kueue [--kueue-queue NAME:GPUS[:preempt]]
        [--priority-class NAME=VALUE] [--topology KEY=V1,V2]]   (program.py says more)

Kueue in-process: FakeKube(kueue=True); kube.kueue.add_queue(name, gpus, preempt=,
topology=), add_priority_class(name, value), add_topology(name, levels); fixture
fake_kueue (fixtures.py).

It writes PATH only once it listens; SIGTERM/SIGINT kill every pod process and exit 0
(so does the death of its parent, with --exit-with-parent, which the fixture passes).
`KubeProgram`/`RemoteKube` (client.py) give the same helpers over HTTP: faults, count,
requests, evict, fault_node, fault_pod, compact.

Hardware faults on a node: `kube.fault_node(NAME, "xid", taint=False)` (the program: `--fault
node=NAME,kind=xid[,taint=true]`, repeatable, or `RemoteKube.fault_node` at run time) gives the
node a True condition GpuXid/XidError whose message is the kernel's `NVRM: Xid (PCI:0000:3b:00):
79, GPU has fallen off the bus`, and every main container started there from then on prints
that line and exits 1 (faults.NODE_FAULTS; `faults.knobs()["node_faults"]`). Without a taint
the scheduler still places pods there; with taint=True the node is also tainted
`nvidia.com/gpu-unhealthy=xid-79:NoSchedule`, as a checker that cordons does, and the
scheduler (which matches NoSchedule/NoExecute taints against tolerations, scheduler.tolerated)
places no new pod there: "N node(s) had untolerated taint {KEY: VALUE}".

A rank's trouble: `kube.fault_pod(KIND, pod=GLOB | rank=N, after=S, times=1)` (the program:
`--fault rank=1,kind=hang,after=2` or `pod=GLOB,...`, repeatable; `RemoteKube.fault_pod` at run
time) strikes the next `times` main containers (0: every one) of pods named like GLOB or whose
job-completion index is N, S seconds after each starts (faults.POD_FAULT_KINDS):
  hang  every process of the container stops (SIGSTOP; runc: `runc pause`, the freezer) and
        stays stopped until the pod is deleted: the rank stops making progress, and its peers
        wait for it;
  slow  its CPU is throttled to faults.SLOW_CPU_SHARE of one CPU (runc: a CFS quota by
        `runc update`; processes: a SIGSTOP/SIGCONT duty cycle of that share, coarser);
  oom   it is SIGKILLed and ends terminated with reason OOMKilled and exit code 137, as the
        kubelet reports the kernel's OOM kill (no memory limit is set: the kill is the fake's).
`faults.knobs()["pod_faults"]` lists them with how often each fired.

Fault injection (stable API; `kube.faults` in-process, `RemoteKube(url).faults` for the
program; both have exactly these methods):

    rule = faults.inject(verb, resource, *, status=None, times=1, lose_response=False,
                         delay=0.0, name=None, message=None, after_commit=False) -> FaultRule
        verb: get list watch create update patch delete deletecollection log (None: any)
        resource: the URL plural: pods jobs jobsets configmaps services secrets events (None: any)
        status=503/504/500/403/...: answer the next `times` matching requests with that code
            and a Status body (reason from the code); times=0: every one until cleared.
            On a watch, status=410 is an ERROR event with a 410 Status in a 200 stream, as a
            real server sends "too old resource version".
        lose_response=True: carry the request out (a create commits), then close the
            connection without answering (the client sees the connection drop).
        after_commit=True (with status): carry the request out, then answer with status
            (a 504 from a gateway that gave up on a write that happened).
        delay=S: hold each matching request S seconds first (a slow server; combine).
        rule.fired counts the requests it affected (re-read with faults.list_rules()).
    faults.clear()                       drop all rules, end connection faults
    faults.list_rules() -> [FaultRule]
    faults.refuse_connections(seconds)   close the listening socket: connection refused,
                                         open connections cut; it listens again after
    faults.stall_connections(seconds)    accept but answer nothing for that long
    faults.set(**knobs)                  the simple knobs: gone_watches=N (N watches get 410),
                                         api_errors=N (N non-watch, non-log requests get 503),
                                         drop_logs_after=L, drop_logs_count=N,
                                         drop_finished_reads=bool, garble_log_stamps=N (N log
                                         lines get a month-13 timestamp), bad_images=[...],
                                         hold_pods=bool (in-process these are attributes too)
    unreachable_server("refused" | "stalled")   context manager yielding a URL where no
                                         server answers: refused at once, or connects hang
                                         until the client's connect timeout

Over HTTP the same lives under /_fake/ (admin.py lists the routes); no real client uses
those paths, and they are neither recorded nor faulted.

The kubelet (kubelet.py has the details): initContainers run in order before the
containers; restartPolicy OnFailure/Always restart a container in place (its previous
log stays readable); emptyDir, configMap and secret volumes appear at their mountPath. As root
(where `unshare --mount` works) each container runs in a private mount namespace with
its volumes bind-mounted, so /launcher or /mnt/config exist inside the pod only;
otherwise `kube.kubelet.isolation_skip_reason` says why, and mount paths in env values
are rewritten to the pod's directory instead. `images` (`--image REF_GLOB=DIR`) makes an
image stand for a directory: its containers get PATH=DIR/bin and the pod's env only.
Other images run on the host's PATH with `python` as this interpreter.

kubectl works against it: legacy discovery, Tables, cluster-wide lists, limit/continue
(every page of a list as of its first page's resourceVersion, with remainingItemCount),
metadata-only lists (Accept `as=PartialObjectMetadataList`),
watch bookmarks (allowWatchBookmarks; every `bookmark_seconds` of quiet and before a
watch times out), logs with follow/sinceTime/sinceSeconds/tailLines/timestamps/limitBytes,
delete with propagationPolicy, and the OpenAPI v2 (protobuf) and v3 documents of the kinds
it serves (openapi.py), so client-side validation and `kubectl explain` work.

Simulation gaps, on purpose: no cluster DNS (MASTER_ADDR is 127.0.0.1, each Job gets its
own MASTER_PORT); strategic merge patch is a JSON merge patch; no server-side apply; a
continued list whose objects changed since a version the watch history no longer holds
gets 410 Gone (a real server keeps serving it until etcd compacts); namespaces spring into being on first use.
"""
