"""The scenario schema: every key, its type, its range and its default, in one table.

A spec is one of:
  Field(type, default, lo, hi, choices)   a leaf value
  dict[str, spec]                          a section with known keys
  MapOf(spec)                              a section with user-chosen keys (e.g. job classes)
  ListOf(spec)                             a list whose items follow spec
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REQUIRED = object()
RESTART = ("in-place", "requeue")


class _FromProfile:
    """Default of a timing or cost parameter of a simulated scheduler: the run's calibration profile
    (loadgen/input/profile.py) supplies the value, with its provenance. One instance, kept by deepcopy."""

    def __repr__(self) -> str:
        return "PROFILE"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


PROFILE = _FromProfile()


@dataclass(frozen=True)
class Field:
    type: type | tuple[type, ...]
    default: Any = REQUIRED
    lo: float | None = None
    hi: float | None = None
    choices: tuple | None = None
    nullable: bool = False
    source: str = ""          # where a default that stands for a real scheduler's default comes from
    # with default PROFILE: the value when the profile lacks the key (measured before it existed);
    # `source` says what that value means
    fallback: Any = None


# Where the defaults of real schedulers' settings come from (docs/fidelity.md lists them all).
K8S_SCHED = "kube-scheduler default, kubernetes pkg/scheduler/apis/config/v1/defaults.go"
K8S_QUEUE = "kube-scheduler default, kubernetes pkg/scheduler/backend/queue/scheduling_queue.go"
K8S_APISERVER = "kube-apiserver default, kubernetes staging/src/k8s.io/apiserver/pkg/server/config.go"
VC_SCHED = "vc-scheduler default, volcano cmd/scheduler/app/options/options.go (v1.14)"
KUEUE_CFG = "Kueue default, kueue apis/config/v1beta2/defaults.go (v0.19.2)"
KUEUE_CQ = "Kueue ClusterQueue default, kueue apis/kueue/v1beta2/clusterqueue_types.go (v0.19.2)"
VC_CTRL = "vc-controller-manager default, volcano cmd/controller-manager/app/options/options.go (v1.14)"
RAY_CONF = "Ray default, ray src/ray/common/ray_config_def.h"
SLURM_CONF = "Slurm default, slurm.conf(5) SchedulerParameters (22.05 and current)"
ETCD = "etcd default, etcd server/storage/quota.go (DefaultQuotaBytes)"


@dataclass(frozen=True)
class MapOf:
    item: Any
    default: Any = None


@dataclass(frozen=True)
class ListOf:
    item: Any
    default: Any = None


NUM = (int, float)
MAX_CHURN = 100_000       # churn multipliers a ceiling search may reach (bounded work: loadgen/input/limits.py)
YEAR_S = 365 * 86400

SHAPE = {
    "members": Field(int, lo=1, hi=4096),
    "gpus": Field(int, lo=1, hi=64),
    "weight": Field(NUM, 1.0, lo=0),
}

JOB_CLASS = {
    "share": Field(NUM, lo=0, hi=1),                   # fraction of jobs in this class
    "shapes": ListOf(SHAPE),                           # (members, gpus per member, weight)
    "duration_s": {"median": Field(NUM, lo=1, hi=YEAR_S), "sigma": Field(NUM, 1.0, lo=0, hi=5),
                   "max": Field(NUM, None, lo=1, hi=YEAR_S, nullable=True)},
    "priority": Field(int, 0),
    # a slice of one GPU per member ("" whole GPUs; "milli:250", "mig:1g.10gb", "shards:2":
    # loadgen/model/gpushare.py); with a slice every shape asks 1 GPU per member
    "gpu_share": Field(str, ""),
}

# A node pool (fleet.pools.<name>): a fraction of the fleet's nodes with one GPU model and sharing mode.
NODE_POOL = {
    "fraction": Field(NUM, lo=0, hi=1),                # of fleet.nodes; the last pool takes the rounding rest
    "gpu_model": Field(str, "h100-80gb"),
    "gpus_per_node": Field(int, None, lo=1, hi=64, nullable=True),   # default: fleet.gpus_per_node
    "sharing": Field(str, "whole", choices=("whole", "mig", "fraction", "shards")),
    "mig_layout": ListOf(Field(str), default=[]),      # instances made on every GPU; [] = dynamic MIG
    "shards_per_gpu": Field(int, 0, lo=0, hi=1024),
}

CHAOS_EVENT = {
    "kind": Field(str, choices=("evictions", "node_failure", "etcd_pressure", "fragmentation_prefill")),
    "at_s": Field(NUM, 0.0, lo=0),                     # virtual seconds from run start
    "until_s": Field(NUM, None, lo=0, nullable=True),
    "rate_per_h": Field(NUM, 60.0, lo=0),              # evictions: members per hour
    "nodes": Field(int, 16, lo=1),                     # node_failure: how many nodes
    "recover_after_s": Field(NUM, None, lo=0, nullable=True),
    "bytes": Field(int, 2 * 1024**3, lo=1, hi=1024**4),  # etcd_pressure: bytes written
    "object_bytes": Field(int, 1024**2, lo=1024, hi=1536 * 1024),
    "fill_fraction": Field(NUM, 0.3, lo=0, hi=1),      # prefill: fraction of nodes touched
    "gpus_per_node": Field(int, 1, lo=1, hi=64),       # prefill: GPUs pinned on each
    "duration_s": Field(NUM, None, lo=1, nullable=True),  # prefill: how long they stay (None = run)
}

SCENARIO = {
    "name": Field(str, None, nullable=True),
    "profile": Field(str, None, nullable=True),        # calibration profile: a shipped name or a path
    "description": Field(str, "", nullable=True),
    "seed": Field(int, 1, lo=0),
    "duration_h": Field(NUM, 6.0, lo=0.0001, hi=24 * 30),
    "drain_h": Field(NUM, 2.0, lo=0, hi=24 * 30),       # keep running after the last arrival
    "warmup_h": Field(NUM, 1.0, lo=0),                 # excluded from utilization/fragmentation
    "sample_every_s": Field(NUM, 60.0, lo=0.01),
    "schedulers_enabled": ListOf(Field(str, choices=("kube", "volcano", "ray", "slurm", "kube-gang", "coscheduling",
                                                     "kueue")),
                                 default=["kube", "volcano", "ray", "slurm"]),
    "fleet": {
        "nodes": Field(int, 10_000, lo=1, hi=1_000_000),
        "gpus_per_node": Field(int, 8, lo=1, hi=64),
        # the fleet model keeps these per node in int32 arrays: bounded far above any machine
        "cpus_per_node": Field(int, 96, lo=1, hi=1_000_000),
        "memory_gib_per_node": Field(int, 1024, lo=1, hi=1_000_000),
        "leaf_size": Field(int, 32, lo=1, hi=1_000_000),
        "leaves_per_spine": Field(int, 16, lo=1, hi=1_000_000),
        "gpu_models": MapOf(Field(NUM, lo=0), default={"h100": 1.0}),
        # node pools with a GPU model and sharing mode each (docs/gpu-sharing.md); {} = whole GPUs
        "pools": MapOf(NODE_POOL, default={}),
        # the fleet from a node list instead: "openb" (../shared/traces/openb_node_list_gpu_node.csv)
        # or the path of an openb node CSV; its GPUs are shared by fraction
        "nodes_from": Field(str, None, nullable=True),
    },
    "workload": {
        "target_allocation": Field(NUM, 0.85, lo=0.01, hi=1.0),
        "churn_multiplier": Field(NUM, 3.0, lo=0.01, hi=MAX_CHURN),
        "offered_load": Field(NUM, None, lo=0.01, hi=10, nullable=True),
        "tenants": Field(int, 6, lo=1, hi=1000),
        "trace": Field(str, None, nullable=True),      # JSONL or openb CSV replaces the generator
        "trace_limit": Field(int, None, lo=1, nullable=True),
        "classes": MapOf(JOB_CLASS, default=None),
    },
    "schedulers": {
        "kube": {
            "percentage_of_nodes_to_score": Field(int, None, lo=1, hi=100, nullable=True,
                                                  source=K8S_SCHED + " (0 = adaptive)"),
            "scoring": Field(str, "least_allocated",
                             choices=("least_allocated", "most_allocated", "balanced_allocation"),
                             source=K8S_SCHED + " (NodeResourcesFit LeastAllocated, cpu 1, memory 1)"),
            "gpu_weight": Field(int, 3, lo=0, hi=100),        # our scheduler profile: GPUs count 3x cpu and memory
            "api_qps": Field(NUM, 50.0, lo=0.1, source=K8S_SCHED + " (clientConnection.qps)"),
            "api_burst": Field(int, 100, lo=1, source=K8S_SCHED + " (clientConnection.burst)"),
            "coscheduling": Field(bool, False),
            "permit_timeout_s": Field(NUM, 60.0, lo=0,
                                      source="scheduler-plugins coscheduling default permitWaitingTimeSeconds"),
            "pod_initial_backoff_s": Field(NUM, 1.0, lo=0, source=K8S_SCHED + " (podInitialBackoffSeconds)"),
            "pod_max_backoff_s": Field(NUM, 10.0, lo=0, source=K8S_SCHED + " (podMaxBackoffSeconds)"),
            "cycle_base_ms": Field(NUM, PROFILE, lo=0),      # serial scheduling cycle per pod: fixed part
            "cycle_per_node_us": Field(NUM, PROFILE, lo=0),  # ... plus this per node Filter examined
            "score_per_node_us": Field(NUM, PROFILE, lo=0),  # ... plus this per node scored
            # ... plus this per node Filter rejected: kube-scheduler keeps its status and records it in
            # the cycle's diagnosis (schedule_one.go findNodesThatPassFilters); 0: a rejected node costs
            # what a passing one does, what a profile measured on an empty fleet says
            "filter_fail_us": Field(NUM, PROFILE, lo=0, fallback=0.0,
                                    source="not measured: a node Filter rejects costs what one it passes does"),
            # each cycle's spread around that mean: lognormal shape fitted to
            # scheduler_scheduling_algorithm_duration_seconds' buckets; 0: every cycle takes its mean
            "cycle_sigma": Field(NUM, PROFILE, lo=0, hi=3, fallback=0.0,
                                 source="no spread measured: every cycle takes its mean"),
            # the cores a cycle uses on a quiet machine: with control_plane.cores set, a cycle that
            # gets fewer (the rest of the control plane busy beside it) takes longer (fakes/sim/cores.py)
            "cycle_cores": Field(NUM, PROFILE, lo=0, hi=64, fallback=0.0,
                                 source="not measured: a cycle takes its quiet cost whatever else runs"),
            "observe_ms": Field(NUM, PROFILE, lo=0),         # bind -> the client's watch sees it
            "release_ms": Field(NUM, PROFILE, lo=0),          # a job done -> its resources schedulable again
            "client_create_ms": Field(NUM, PROFILE, lo=0),    # the client sends one pod create per this (its pace)
            # real backend only (fakes/kube/cluster.py, fakes/kube/target.py)
            "completion": Field(str, "adapter", choices=("adapter", "kwok")),
            "client_threads": Field(int, 8, lo=1, hi=256),
            "node_threads": Field(int, 16, lo=1, hi=256),
            "scrape_interval_s": Field(NUM, 10.0, lo=0.1),
            "cluster_name": Field(str, "gangstorm"),
            # how GPU slices reach kube-scheduler (fakes/kube/gpusharing.py): NVIDIA device plugin
            # extended resources (whole GPUs, fixed MIG layouts), DRA ResourceSlices (every mode), or
            # auto: the device plugin where it can express the fleet's pools, else DRA
            "gpu_api": Field(str, "auto", choices=("auto", "device_plugin", "dra")),
        },
        "volcano": {
            "schedule_period_s": Field(NUM, 1.0, lo=0.01, source=VC_SCHED + " (--schedule-period)"),
            "actions": ListOf(Field(str, choices=("enqueue", "allocate", "backfill", "preempt", "reclaim")),
                              default=["enqueue", "allocate", "backfill"]),
            "plugins": ListOf(Field(str, choices=("gang", "priority", "proportion", "drf", "binpack",
                                                  "predicates", "nodeorder", "conformance", "deviceshare")),
                              default=["gang", "priority", "proportion", "drf", "binpack",
                                       "predicates", "nodeorder"]),
            "api_qps": Field(NUM, 2000.0, lo=0.1, source=VC_SCHED + " (--kube-api-qps)"),
            "api_burst": Field(int, 2000, lo=1, source=VC_SCHED + " (--kube-api-burst)"),
            "controller_qps": Field(NUM, 50.0, lo=0.1, source=VC_CTRL + " (--kube-api-qps)"),
            "controller_burst": Field(int, 100, lo=1, source=VC_CTRL + " (--kube-api-burst)"),
            "session_base_ms": Field(NUM, PROFILE, lo=0),    # one scheduling session: fixed part
            "session_per_node_us": Field(NUM, PROFILE, lo=0),  # ... per node in the snapshot
            "session_per_task_us": Field(NUM, PROFILE, lo=0),  # ... per pending task considered
            # ... per task placed and still running: the snapshot clones it, proportion and drf count it
            # (fakes/volcano/costcurve.py --running); a profile without it charges nothing
            "session_per_running_task_us": Field(NUM, PROFILE, lo=0, fallback=0.0,
                                                 source="unset in a profile: 0 (a session charged for pending "
                                                        "tasks only)"),
            # the job updater's PodGroup write at session close (PUT podgroups); unset: control_plane.write_ms
            "podgroup_update_ms": Field(NUM, PROFILE, lo=0, fallback=0.0,
                                        source="unset in a profile: 0, a PodGroup update costs control_plane.write_ms"),
            "reject_per_node_us": Field(NUM, PROFILE, lo=0),   # allocate's predicate walk: a node passed over
            "feasible_per_node_us": Field(NUM, PROFILE, lo=0),  # ... a feasible node found and scored
            "observe_ms": Field(NUM, PROFILE, lo=0),
            "release_ms": Field(NUM, PROFILE, lo=0),          # a job done -> its resources schedulable again
            "queues": {
                "weights": MapOf(Field(NUM, lo=0), default={}),
                "capability_gpus": MapOf(Field(int, lo=0), default={}),
            },
            # the job controller's workers: the real backend's --worker-threads, the sim's workers
            # (fakes/volcano/sim.py); unset: Volcano's default of 3
            "controller_workers": Field(int, None, lo=1, hi=256, nullable=True,
                                        source=VC_CTRL + " (--worker-threads 3)"),
            "client_threads": Field(int, 8, lo=1, hi=256),
            "scrape_interval_s": Field(NUM, 10.0, lo=0.1),
            # fraction pools (HAMi vGPU via deviceshare, fakes/volcano/vgpu.py): the plugin's
            # device-level node score and its weight; how often the fake device plugin re-reports
            "vgpu_policy": Field(str, "binpack", choices=("binpack", "spread", "")),
            "vgpu_weight": Field(int, 10, lo=0),
            "vgpu_report_s": Field(NUM, 30.0, lo=0.1),
            # the simulated Volcano's vGPU books: "fixed" (what is held) or "v1.14.1" (a share also
            # stays booked until the next report, fakes/volcano/sim.py; docs/gpu-sharing.md)
            "vgpu_books": Field(str, "fixed", choices=("fixed", "v1.14.1")),
            # real backend only: vc-scheduler's klog -v; 3 logs the vGPU books every filter reads
            # ("Current Device ... UsedCores", tools/volcano/vgpu_books.py)
            "log_verbosity": Field(int, 1, lo=0, hi=10),
        },
        # Kueue admitting gangs in front of kube-scheduler (fakes/kueue/, docs/kueue.md)
        "kueue": {
            "queues": {
                "nominal_gpus": MapOf(Field(int, lo=0), default={}),       # per tenant or queue
                "default_nominal_share": Field(NUM, 0.25, lo=0.0, hi=1.0),  # of the fleet's GPUs, others
                "borrowing_limit_gpus": Field(int, None, lo=0, nullable=True, source=KUEUE_CQ + " (no limit)"),
                "queueing_strategy": Field(str, "BestEffortFIFO", choices=("BestEffortFIFO", "StrictFIFO"),
                                           source=KUEUE_CQ),
                "reclaim_within_cohort": Field(str, "Any", choices=("Never", "LowerPriority", "Any")),
                "within_cluster_queue": Field(str, "LowerPriority",
                                              choices=("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
            },
            "topology": Field(str, "preferred", choices=("preferred", "required", "none")),   # TAS, by leaf
            # kube-scheduler's profile, as for kube (fakes/kube/target.py scheduler_config)
            "scoring": Field(str, "least_allocated", choices=("least_allocated", "most_allocated",
                                                              "balanced_allocation")),
            "gpu_weight": Field(int, 3, lo=0, hi=100),
            "api_qps": Field(NUM, 300.0, lo=0.1, source=KUEUE_CFG + " (clientConnection.qps)"),
            "api_burst": Field(int, 500, lo=1, source=KUEUE_CFG + " (clientConnection.burst)"),
            "workload_create_ms": Field(NUM, PROFILE, lo=0),  # last pod created -> Workload in its queue
            "admission_cycle_ms": Field(NUM, PROFILE, lo=0),  # one Kueue scheduling cycle
            "ungate_ms": Field(NUM, PROFILE, lo=0),           # admitted -> first member bound
            "pod_bind_ms": Field(NUM, PROFILE, lo=0),         # ... each next member
            "observe_ms": Field(NUM, PROFILE, lo=0),
            "release_ms": Field(NUM, PROFILE, lo=0),
            # real backend only
            "client_threads": Field(int, 8, lo=1, hi=256),
            "scrape_interval_s": Field(NUM, 10.0, lo=0.1),
        },
        "ray": {
            "multi_node_strategy": Field(str, "STRICT_SPREAD",
                                         choices=("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")),
            "single_node_strategy": Field(str, "PACK",
                                          choices=("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")),
            "gcs_base_ms": Field(NUM, PROFILE, lo=0),          # GCS scheduling work per group: fixed part
            "gcs_per_bundle_ms": Field(NUM, PROFILE, lo=0),    # ... per bundle
            "gcs_per_bundle_sq_us": Field(NUM,
                                          PROFILE, lo=0),  # ... per bundle squared, per node (k bundles on a node: k^2)
            "gcs_per_node_us": Field(NUM, PROFILE, lo=0),      # ... per alive node, every attempt
            "gcs_per_node_scored_ns": Field(NUM, PROFILE, lo=0),  # ... per alive node per scoring pass (GetBestNode)
            "commit_rtt_ms": Field(NUM, PROFILE, lo=0),        # one prepare or commit round to the raylets
            "commit_per_node_ms": Field(NUM, PROFILE, lo=0),   # ... plus this per node called (they answer in turn)
            "gcs_followup_ratio": Field(NUM, PROFILE, lo=0),   # a created group costs the GCS this x its attempt again
            "observe_ms": Field(NUM, PROFILE, lo=0),           # ready -> the driver's callback
            "release_ms": Field(NUM, PROFILE, lo=0),          # a job done -> its resources schedulable again
            "retry_initial_s": Field(NUM, 0.1, lo=0,
                                     source=RAY_CONF + " (gcs_create_placement_group_retry_min_interval_ms 100)"),
            "retry_multiplier": Field(NUM, 1.5, lo=1,
                                      source=RAY_CONF + " (gcs_create_placement_group_retry_multiplier)"),
            "retry_max_s": Field(NUM, 1.0, lo=0,
                                 source=RAY_CONF + " (gcs_create_placement_group_retry_max_interval_ms 1000)"),
            "gcs_tick_s": Field(NUM, 1.0, lo=0.001, source="Ray constant, src/ray/gcs/gcs_placement_group_manager.cc "
                                "GcsPlacementGroupManager::Tick (retries due pending groups every 1000 ms)"),
            # real backend only (fakes/ray/target.py, docs/ray-fakelets.md): what the fleet's nodes are
            "nodes": Field(str, "raylet", choices=("raylet", "fakelet")),
            "fakelet_syncer": Field(str, "auto", choices=("auto", "node", "shared")),
            "fakelets_per_process": Field(int, 2000, lo=1, hi=20_000),
            # who answers the GCS's health checks and load polls: python, go (fakelet-front), auto
            # (python up to 1,000 fakelets, go above: fakes/ray/fleet_settings.py)
            "fakelet_front": Field(str, "auto", choices=("auto", "python", "go")),
            # the GCS's GetResourceLoad period (Ray: gcs_pull_resource_loads_period_milliseconds, 1000);
            # null keeps 1000 for raylets and stretches it for large fakelet fleets (fakes/ray/target.py)
            "gcs_load_poll_ms": Field(int, None, lo=100, hi=600_000, nullable=True),
        },
        "slurm": {
            "sched_interval_s": Field(NUM, 60.0, lo=1, source=SLURM_CONF + " (sched_interval)"),
            "sched_min_interval_s": Field(NUM, 2e-6, lo=0, source=SLURM_CONF + " (sched_min_interval = 2 us)"),
            "batch_sched_delay_s": Field(NUM, 3.0, lo=0, source=SLURM_CONF + " (batch_sched_delay)"),
            "bf_interval_s": Field(NUM, 30.0, lo=1, source=SLURM_CONF + " (bf_interval)"),
            "bf_window_min": Field(int, 1440, lo=1, source=SLURM_CONF + " (bf_window)"),
            "bf_resolution_s": Field(int, 60, lo=1, source=SLURM_CONF + " (bf_resolution)"),
            "bf_max_job_test": Field(int, 500, lo=1, source=SLURM_CONF + " (bf_max_job_test)"),
            "bf_max_job_start": Field(int, 0, lo=0, source=SLURM_CONF + " (bf_max_job_start; 0 = no limit)"),
            "bf_yield_interval_s": Field(NUM, 2.0, lo=1e-6, source=SLURM_CONF + " (bf_yield_interval 2,000,000 us)"),
            "bf_yield_sleep_s": Field(NUM, 0.5, lo=1e-6, source=SLURM_CONF + " (bf_yield_sleep 500,000 us)"),
            "max_sched_time_s": Field(NUM, 2.0, lo=1,
                                      source=SLURM_CONF + " (max_sched_time: MessageTimeout/2 within [1, 2] s)"),
            "background_tick_s": Field(NUM, 1.0, lo=0.001,
                                       source="Slurm constant, src/slurmctld/controller.c _slurmctld_background "
                                              "(10 x usleep(100000)); backfill_agent's idle sleep (1 s)"),
            "default_queue_depth": Field(int, 100, lo=1, source=SLURM_CONF + " (default_queue_depth)"),
            # Fair share and age need SlurmDBD (slurmctld ignores their weights without it); the real
            # backend runs without one, so "none" is what it does and "slurmdbd" is sim-only.
            "accounting_storage": Field(str, "none", choices=("none", "slurmdbd")),
            "priority_weight_age": Field(int, 1000, lo=0),
            "priority_weight_fairshare": Field(int, 10000, lo=0),
            "priority_weight_jobsize": Field(int, 1000, lo=0),
            "priority_max_age_h": Field(NUM, 168.0, lo=0.01, source="Slurm default, slurm.conf(5) PriorityMaxAge 7-0"),
            "priority_decay_half_life_h": Field(NUM, 168.0, lo=0.01,
                                                source="Slurm default, slurm.conf(5) PriorityDecayHalfLife 7-0"),
            "switches": Field(int, 0, lo=0),                  # --switches=N for gangs of switches_min_members+
            "switches_min_members": Field(int, 8, lo=1),
            "switches_max_wait_s": Field(NUM, 300.0, lo=0, source=SLURM_CONF + " (max_switch_wait)"),
            "time_limit_factor": Field(NUM, 1.5, lo=1),       # --time = duration x this (the workload's own padding)
            "cred_expire_s": Field(NUM, 120.0, lo=0, source="Slurm default, slurm.conf(5) AuthInfo cred_expire 120"),
            "rpc_ms": Field(NUM, PROFILE, lo=0),              # slurmctld work per submit RPC: fixed part
            "rpc_per_node_us": Field(NUM, PROFILE, lo=0),     # ... per node (job_allocate's test_only select)
            "main_cycle_base_ms": Field(NUM, PROFILE, lo=0),  # main scheduling loop: fixed part
            "main_cycle_per_pending_us": Field(NUM, PROFILE, lo=0),  # ... per pending job (build_job_queue, sort)
            "main_cycle_per_job_us": Field(NUM, PROFILE, lo=0),  # ... per job started
            "main_cycle_per_job_node_ns": Field(NUM, PROFILE, lo=0),  # ... per job started and node
            "main_cycle_per_fail_us": Field(NUM, PROFILE, lo=0),  # ... per job tested that cannot start
            "main_cycle_per_fail_node_ns": Field(NUM, PROFILE, lo=0),  # ... the same, per node
            "main_cycle_per_skip_us": Field(NUM, PROFILE, lo=0),  # ... per job popped behind a blocked partition
            "bf_cycle_base_ms": Field(NUM, PROFILE, lo=0),    # backfill cycle: fixed part
            "bf_cycle_per_job_us": Field(NUM, PROFILE, lo=0),  # ... per job tested
            "bf_cycle_per_job_node_ns": Field(NUM, PROFILE, lo=0),  # ... per job tested and node
            "bf_cycle_per_start_us": Field(NUM, PROFILE, lo=0),  # ... per job started, on top of its test
            "bf_cycle_per_start_node_ns": Field(NUM, PROFILE, lo=0),  # ... the same, per node
            "agent_ms": Field(NUM, PROFILE, lo=0),            # how long a batch-launch or terminate agent lives
            "observe_ms": Field(NUM, PROFILE, lo=0),          # start -> the client's squeue poll sees it
            "release_ms": Field(NUM, PROFILE, lo=0),          # a job done -> its resources schedulable again
            # real backend only (fakes/slurm/conf.py, fakes/slurm/target.py)
            "submit_workers": Field(int, 4, lo=1, hi=256),
            "poll_s": Field(NUM, 0.5, lo=0.01),
            "boot_timeout_s": Field(NUM, 1200.0, lo=1),
            "timeouts": MapOf(Field(int, lo=1), default={}),    # e.g. SlurmdTimeout: 900
            "scheduler_extra": ListOf(Field(str), default=[]),  # extra SchedulerParameters items
        },
    },
    "control_plane": {
        "etcd_quota_bytes": Field(int, 2 * 1024**3, lo=1024**2, source=ETCD),
        "compaction_interval_s": Field(NUM, 300.0, lo=1, source="kube-apiserver default --etcd-compaction-interval 5m"),
        "max_requests_inflight": Field(int, 400, lo=1, source=K8S_APISERVER),
        "max_mutating_requests_inflight": Field(int, 200, lo=1, source=K8S_APISERVER),
        "write_ms": Field(NUM, PROFILE, lo=0),            # apiserver + etcd service time per write
        "create_ms": Field(NUM, PROFILE, lo=0),           # a client's create call, end to end
        # the spread around those means: lognormal shape (sigma of ln latency) fitted to
        # apiserver_request_duration_seconds' buckets (loadgen/model/lognormal.py); 0: every
        # request takes the mean, what a profile measured before the spread was recorded says
        "write_sigma": Field(NUM, PROFILE, lo=0, hi=3, fallback=0.0,
                             source="no spread measured: every request takes write_ms"),
        "create_sigma": Field(NUM, PROFILE, lo=0, hi=3, fallback=0.0,
                              source="no spread measured: every request takes create_ms"),
        # the machine the control plane shares with the scheduler's loop (fakes/sim/cores.py): its
        # cores (0: machines of its own, nothing shared), what the stack uses with nothing to
        # schedule, and the CPU the rest of it spends per pod placed (create, bind, watches, KWOK)
        "cores": Field(NUM, PROFILE, lo=0, hi=4096, fallback=0.0,
                       source="unset: the control plane has machines of its own, nothing shared"),
        "idle_cores": Field(NUM, PROFILE, lo=0, hi=4096, fallback=0.0, source="unset: 0"),
        "pod_cpu_ms": Field(NUM, PROFILE, lo=0, fallback=0.0, source="unset: 0"),
        "object_bytes": {"pod": Field(NUM, PROFILE, lo=1), "podgroup": Field(NUM, PROFILE, lo=1)},
        "node_bytes": Field(NUM, PROFILE, lo=0),          # a Node object in etcd
        "lease_bytes": Field(NUM, PROFILE, lo=0),         # a node Lease in etcd
        "lease_renew_s": Field(NUM, PROFILE, lo=0.1),     # every node renews its Lease this often
        "node_status_s": Field(NUM, PROFILE, lo=0.1),     # ... and rewrites its status this often
        "recovery_s": Field(NUM, PROFILE, lo=0),          # operator: compact + defrag + disarm takes this
        "auto_recover_after_s": Field(NUM, None, lo=0, nullable=True),
        # gangstorm's own client: a refused create is retried this often, until the job is given up
        "client_retry_s": Field(NUM, 10.0, lo=0.01),
        "submit_timeout_s": Field(NUM, 900.0, lo=0),
    },
    "chaos": ListOf(CHAOS_EVENT, default=[]),
    "slo": {
        "admission_p99_s": Field(NUM, 300.0, lo=0),
        "admission_p999_s": Field(NUM, None, lo=0, nullable=True),
        "min_alloc_util": Field(NUM, None, lo=0, hi=1, nullable=True),
    },
    # Placement-to-ready and rendezvous (loadgen/model/startup/imagecache.py, rendezvous.py; docs/budgets.md).
    # Inputs describing the user's images, registry and training code, not scheduler constants;
    # the defaults turn both off (ready and training at the admission instant).
    "startup": {
        "image": {
            "image_gb": Field(NUM, 0.0, lo=0, hi=10_000),
            "node_pull_gbps": Field(NUM, 40 * 8 / 720, lo=1e-3, hi=10_000,
                                    source="the seed's cold start: a 40 GB image in twelve minutes"),
            "registry_gbps": Field(NUM, 100.0, lo=1e-3, hi=1e6),
            "warm_fraction": Field(NUM, 0.0, lo=0, hi=1),
            "prepull": Field(bool, False),
            "container_start_s": Field(NUM, 0.0, lo=0, hi=86400),
        },
        "rendezvous": {
            "base_s": Field(NUM, 0.0, lo=0, hi=86400),
            "per_member_s": Field(NUM, 0.0, lo=0, hi=3600),
            "per_extra_leaf_s": Field(NUM, 0.0, lo=0, hi=86400),
            "misaligned_s": Field(NUM, 0.0, lo=0, hi=86400),
            "jitter_sigma": Field(NUM, 0.0, lo=0, hi=5),
            "timeout_s": Field(NUM, 600.0, lo=0.001, hi=86400,
                               source="torchrun default, torch/distributed/elastic/rendezvous/dynamic_rendezvous.py "
                                      "(join_timeout 600 s)"),
            "restart_backoff_s": Field(NUM, 10.0, lo=0, hi=86400,
                                       source="kubelet default, Kubernetes Pod lifecycle docs (container restart "
                                              "back-off starts at 10 s)"),
            # How each scheduler restarts a gang whose rendezvous timed out (loadgen/drive/lifecycle.py)
            "restart": {
                "kube": Field(str, "in-place", choices=RESTART,
                              source="batch/v1 Job restartPolicy OnFailure: the kubelet restarts the container"),
                "volcano": Field(str, "requeue", choices=RESTART,
                                 source="Volcano Job policy event PodFailed, action RestartJob"),
                "ray": Field(str, "in-place", choices=RESTART,
                             source="Ray Train FailureConfig: the worker group restarts on its placement group"),
                "slurm": Field(str, "requeue", choices=RESTART, source="Slurm scontrol requeue / sbatch --requeue"),
            },
        },
    },
    # SM activity of allocated GPUs (loadgen/model/startup/activity.py): what the fake DCGM exporter
    # publishes and what cost uses. Inputs describing the training code.
    "activity": {
        "sm_active": Field(NUM, 0.7, lo=0.01, hi=1),
        "dataloader_stall": Field(NUM, 0.0, lo=0, hi=0.99),
        "checkpoint_every_s": Field(NUM, 0.0, lo=0, hi=1e7),
        "checkpoint_s": Field(NUM, 0.0, lo=0, hi=1e7),
    },
    "cost": {
        # Inputs, not model constants: what the user pays per GPU-hour (active utilization is
        # measured per run from `activity`, the scheduling tax too: loadgen/measure/statistics.py).
        "gpu_hour_usd": Field(NUM, 2.5, lo=0),
        # A GPU slice is charged by what it takes from the GPU: (1 - w) x compute share + w x memory
        # share, w = this (0: by compute, 1: by memory); a whole GPU is 1 either way.
        "slice_memory_weight": Field(NUM, 0.0, lo=0, hi=1),
    },
    # gangstorm ceiling (loadgen/drive/ceiling.py): from `start`, multiply the churn by `growth` until the
    # SLO breaks, then bisect geometrically until the bracket is within `precision` (0.1: 10%).
    # Every point offers the same number of jobs, so each covers the same number of job lifetimes.
    "ceiling": {
        "start": Field(NUM, None, lo=0.01, hi=MAX_CHURN, nullable=True),   # default: workload.churn_multiplier
        "growth": Field(NUM, 2.0, lo=1.1, hi=100),
        "precision": Field(NUM, 0.1, lo=0.01, hi=10),
        "min_multiplier": Field(NUM, 0.01, lo=0.01, hi=MAX_CHURN),
        "max_multiplier": Field(NUM, 10_000, lo=0.01, hi=MAX_CHURN),
        "max_points": Field(int, 24, lo=2, hi=200),
        "jobs": Field(int, 8000, lo=20, hi=200_000),
    },
}

# Kubernetes with gangs (docs/kube-gang.md): the kube section's settings, with gang semantics on.
# kube-gang is kube-scheduler v1.36.1's native gang scheduling (Workload + PodGroup, alpha); coscheduling
# is scheduler-plugins' Coscheduling plugin (its PodGroup CRD). Their costs come from the profile's own
# sections (fakes/profiles/*.yaml).
K8S_GANG = "kube-scheduler v1.36.1, kubernetes pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go"
SP_COSCHED = "scheduler-plugins v0.34.7, apis/config/v1/defaults.go"
GANG_COSTS = {
    "gang_objects_ms": Field(NUM, PROFILE, lo=0),    # the gang objects' creates, before the job's pods go out
    "bind_ms": Field(NUM, PROFILE, lo=0),            # the scheduler's Bind extension point (limiter wait included)
}
SCENARIO["schedulers"]["kube-gang"] = {
    **SCENARIO["schedulers"]["kube"],
    **GANG_COSTS,
    "coscheduling": Field(bool, True),
    "permit_timeout_s": Field(NUM, 300.0, lo=0, source=K8S_GANG + " (permitTimeoutDuration, fixed)"),
    # real only (TopologyAwareWorkloadScheduling): keep each gang that fits in one leaf or spine there
    "topology": Field(str, "none", choices=("none", "leaf", "spine")),
    "cluster_name": Field(str, "gangstorm-kube-gang"),
}
SCENARIO["schedulers"]["coscheduling"] = {
    **SCENARIO["schedulers"]["kube"],
    **GANG_COSTS,
    "coscheduling": Field(bool, True),
    "permit_timeout_s": Field(NUM, 60.0, lo=0, source=SP_COSCHED + " (permitWaitingTimeSeconds; the adapter "
                                                      "sets each PodGroup's scheduleTimeoutSeconds to it)"),
    "cluster_name": Field(str, "gangstorm-coscheduling"),
}

# The default bimodal mix: many small jobs, a tail of 8-64-node gangs.
DEFAULT_CLASSES = {
    "small": {
        "share": 0.93,
        "shapes": [
            {"members": 1, "gpus": 1, "weight": 0.40},
            {"members": 1, "gpus": 2, "weight": 0.15},
            {"members": 1, "gpus": 4, "weight": 0.15},
            {"members": 1, "gpus": 8, "weight": 0.15},
            {"members": 2, "gpus": 8, "weight": 0.10},
            {"members": 4, "gpus": 8, "weight": 0.05},
        ],
        "duration_s": {"median": 1800, "sigma": 1.0, "max": 86400},
        "priority": 0,
    },
    "large": {
        "share": 0.07,
        "shapes": [
            {"members": 8, "gpus": 8, "weight": 0.45},
            {"members": 16, "gpus": 8, "weight": 0.30},
            {"members": 32, "gpus": 8, "weight": 0.17},
            {"members": 64, "gpus": 8, "weight": 0.08},
        ],
        "duration_s": {"median": 7200, "sigma": 0.8, "max": 172800},
        "priority": 0,
    },
}
