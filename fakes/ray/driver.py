"""The Ray driver process behind RealRay: the only process of a run that imports ray.

Run as `python -m fakes.ray.driver ADDRESS [--label RUN_LABEL] [--role submit|observe]` with the fleet's environment
(fleet.RAY_ENV: the node IP stays 127.0.0.1). It reads one
JSON command per stdin line and writes one JSON message per stdout line. It is a plain
subprocess rather than a multiprocessing child because a 'spawn' child re-imports the parent's
__main__, which under Locust imports locust and gevent-monkey-patches the child: the Ray client
then hangs.

Every placement group it creates is named gs-<run label>-<id> (survey.pg_prefix), so that it is
recognisable on a cluster gangstorm did not start, and its job carries the run label in its
metadata. At stop (or EOF on stdin: the parent died) it removes every group it created; groups of
a driver that dies anyway are removed by the GCS with its job (none is detached).

Roles (several Locust processes on one attached cluster, RealRay's ctx.role): a "submit" driver
creates, holds and removes its process's groups as always but sends no control-plane samples; the
"observe" driver creates none of the workload's groups: every POLL_S it reads the GCS's placement
group table once and reports each change of the run's groups (gs-<label>-<id>, whichever driver
owns them) as a "seen" message.

Commands (parent -> worker):
  {"op":"submit","id":J,"bundles":[...],"strategy":S,"hold_s":D,"labels":{K: V}|absent}
                                           labels: every bundle only on nodes with these labels
                                           (bundle_label_selector; fakes/ray/share.py)
  {"op":"prefill","id":K,"bundles":[...],"hold_s":D|null,"pin":NODE_ID|null}   pinned (STRICT_PACK);
                                           pin: by the node's ray.io/node-id label (attached clusters)
  {"op":"fleet","node_ids":[...]}          count only these nodes in control-plane samples
  {"op":"evict","id":J}                    remove J's group and create it again (whole gang)
  {"op":"requeue","id":J}                  the same, unreported: the target already said so (restart)
  {"op":"start","id":J,"placement":P,"ready_at":[T per bundle]}   start J's member actors, one per
                                           bundle, each up no earlier than its T (fakes/ray/members.py)
  {"op":"node_dead","node_id":H,"t":T}     a raylet was killed at T: watch the groups it held
  {"op":"stop"}
Messages (worker -> parent):
  {"ev":"hello","pid":P}                   once connected
  {"ev":"ready","id":J,"t":T,"nodes":[node_id per bundle],"placement":P,"sched_ms":..,"e2e_ms":..,"attempts":..}
                                           P counts the group's placements (1, then +1 per eviction or reschedule)
  {"ev":"members_ready","id":J,"placement":P,"t":T,"created":T0,"start_s":[..],"pids":[..],"misplaced":N}
                                           every member actor of placement P is up (after "start");
                                           N of them run on another node than their bundle
  {"ev":"finished","id":J,"t":T}
  {"ev":"lost","id":J,"t":T,"nodes":[...],"state":S}    (after node_dead)
  {"ev":"failed","id":J,"t":T,"reason":R}
  {"ev":"cp","t":T,...}                    control-plane sample, about once a second (not in the submit role)
  {"ev":"seen","id":J,"t":T,"pg":PG_ID,"state":S,"nodes":[node_id per bundle],"sched_ms":..,"e2e_ms":..,
   "attempts":..}                          observe role: the run's group J as the GCS lists it now (S: PENDING,
                                           CREATED, RESCHEDULING, REMOVED, or GONE when no longer listed)
  {"ev":"error","error":E} / {"ev":"stopped","removed_at_stop":N}
Timestamps are time.monotonic() (CLOCK_MONOTONIC, shared by every process on the machine), taken
in this process when Ray reports; the target turns them into run seconds with its RunClock.
"""
from __future__ import annotations

import heapq
import json
import os
import queue
import sys
import threading
import time
from typing import Any

from fakes.ray.fleet import HEAD_NAME
from fakes.ray.members import Members
from fakes.ray.real.shared import POLL_S
from fakes.ray.survey import JOB_MARK, pg_prefix

CP_EVERY_S = 1.0
TABLE_EVERY_S = 10.0
WATCH_EVERY_S = 0.2


class Worker:
    def __init__(self, address: str, out, label: str = "gangstorm", role: str = "all"):
        import ray
        from ray.job_config import JobConfig
        from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
        self.ray = ray
        self._pg, self._table, self._remove = placement_group, placement_group_table, remove_placement_group
        ray.init(address=address, log_to_driver=False, logging_level="WARNING", configure_logging=True,
                 include_dashboard=False, job_config=JobConfig(metadata={JOB_MARK: label}))
        self.prefix = pg_prefix(label)
        self.role = role
        self.seen: dict[int, tuple[str, str]] = {}      # observe role: id -> (group id, state) last reported
        self.fleet_ids: set[str] | None = None          # None: every node but the head
        self.out = out
        self.out_lock = threading.Lock()
        self.q: queue.Queue = queue.Queue()
        self.groups: dict[int, dict[str, Any]] = {}     # id -> {pg, spec, state, end, token, nodes}
        self.timers: list[tuple[float, int, int]] = []  # (end mono, id, token)
        self.watch: dict[int, float] = {}                # id -> node-kill time (monotonic)
        self.created = 0
        self.removed = 0
        self.gcs_states: dict[str, int] = {}
        self.next_table = 0.0
        self.dead_nodes: set[str] = set()     # killed raylets
        self.dead_unseen: set[str] = set()    # ... the GCS has not marked dead yet
        self.members = Members(ray, self.prefix, lambda *a: self.q.put(("member", *a)))

    def send(self, **msg: Any) -> None:
        with self.out_lock:
            self.out.write(json.dumps(msg, separators=(",", ":")) + "\n")
            self.out.flush()

    # -- groups -----------------------------------------------------------------------------
    def create(self, gid: int, spec: dict[str, Any]) -> None:
        g = self.groups.get(gid) or {"spec": spec, "token": 0}
        g["token"] += 1
        token = g["token"]
        g.update(state="pending", nodes=[], end=None)
        pin = {"bundle_label_selector": [{"ray.io/node-id": spec["pin"]}] * len(spec["bundles"])} \
            if spec.get("pin") else {"bundle_label_selector": [spec["labels"]] * len(spec["bundles"])} \
            if spec.get("labels") else {}
        g["pg"] = self._pg(spec["bundles"], strategy=spec["strategy"], name=f"{self.prefix}{gid}", **pin)
        self.groups[gid] = g
        fut = g["pg"].ready().future()
        fut.add_done_callback(lambda f, gid=gid, token=token: self.q.put(("ready", gid, token, time.monotonic(), f)))

    def on_ready(self, gid: int, token: int, t: float, fut) -> None:
        g = self.groups.get(gid)
        if g is None or g["token"] != token or g["state"] != "pending":
            return
        if fut.exception() is not None:
            g["state"] = "done"
            self.send(ev="failed", id=gid, t=t, reason=f"ready: {fut.exception()!r}"[:200])
            return
        row = self._table(g["pg"])
        g["nodes"] = [row["bundles_to_node_id"][i] for i in sorted(row["bundles_to_node_id"])]
        g["state"] = "held"
        g["placement"] = g.get("placement", 0) + 1
        self.created += 1
        hold = g["spec"].get("hold_s")
        if hold is not None:
            g["end"] = time.monotonic() + hold
            heapq.heappush(self.timers, (g["end"], gid, token))
        st = row.get("stats", {})
        self.send(ev="ready", id=gid, t=t, nodes=g["nodes"], placement=g["placement"],
                  sched_ms=st.get("scheduling_latency_ms"),
                  e2e_ms=st.get("end_to_end_creation_latency_ms"), attempts=st.get("scheduling_attempt"))

    def start_members(self, gid: int, placement: int, ready_at: list[float]) -> None:
        g = self.groups.get(gid)
        if g is None or g["state"] != "held" or g.get("placement") != placement or "pg" not in g:
            return          # finished, evicted or lost since the target asked
        try:
            self.members.start(gid, placement, g["pg"], ready_at)
        except Exception as e:  # noqa: BLE001 - the run goes on without this gang's READY
            self.members.kill(gid)
            self.send(ev="error", error=f"start members gs-{gid}: {e!r}"[:300])

    def member_done(self, gid: int, placement: int, i: int, t: float, fut) -> None:
        try:
            gang = self.members.done(gid, placement, i, fut)
        except RuntimeError as e:
            self.send(ev="error", error=str(e))
            return
        if gang is not None:
            bundles = self.groups[gid]["nodes"] if gid in self.groups else gang["nodes"]
            misplaced = sum(1 for got, want in zip(gang.pop("nodes"), bundles) if got != want)
            self.send(ev="members_ready", id=gid, placement=placement, t=t, misplaced=misplaced, **gang)

    def remove(self, gid: int) -> None:
        self.members.kill(gid)          # before the group: Ray would kill them with it, but later
        g = self.groups.get(gid)
        if g is None or "pg" not in g:
            return
        try:
            self._remove(g["pg"])
            self.removed += 1
        except Exception as e:  # noqa: BLE001 - the GCS may already have dropped it
            self.send(ev="error", error=f"remove gs-{gid}: {e!r}"[:300])
        g.pop("pg", None)

    def finish_due(self) -> None:
        mono = time.monotonic()
        while self.timers and self.timers[0][0] <= mono:
            _, gid, token = heapq.heappop(self.timers)
            g = self.groups.get(gid)
            if g is None or g["token"] != token or g["state"] != "held":
                continue
            self.remove(gid)
            g["state"] = "done"
            self.send(ev="finished", id=gid, t=time.monotonic())
            self.groups.pop(gid, None)
            self.watch.pop(gid, None)

    def evict(self, gid: int, report: bool = True) -> None:
        g = self.groups.get(gid)
        if g is None or g["state"] == "done":
            return
        self.remove(gid)
        if report:
            self.send(ev="lost", id=gid, t=time.monotonic(), nodes=g["nodes"], state="REMOVED", reason="evicted")
        self.watch.pop(gid, None)
        self.create(gid, g["spec"])

    def node_dead(self, node_id: str, t: float) -> None:
        self.dead_nodes.add(node_id)
        self.dead_unseen.add(node_id)
        for gid, g in self.groups.items():
            if g["state"] == "held" and node_id in g["nodes"]:
                g["state"] = "lost"
                self.members.kill(gid)      # the whole gang's processes restart with it
                self.watch[gid] = t
                lost = [i for i, n in enumerate(g["nodes"]) if n == node_id]
                self.send(ev="lost", id=gid, t=t, nodes=g["nodes"], lost=lost, state="CREATED",
                          reason="node-failure")

    def poll_watched(self) -> None:
        """Groups that lost a node: wait for the GCS to reschedule them (or drop them)."""
        for gid in list(self.watch):
            g = self.groups.get(gid)
            if g is None or "pg" not in g:
                self.watch.pop(gid, None)
                continue
            row = self._table(g["pg"])
            state = row.get("state")
            g.setdefault("seen", set()).add(state)
            if state == "REMOVED":
                self.watch.pop(gid, None)
                g["state"] = "done"
                self.send(ev="failed", id=gid, t=time.monotonic(), reason="pg-removed-after-node-failure")
            elif state == "CREATED" and not set(row["bundles_to_node_id"].values()) & self.dead_nodes:
                self.watch.pop(gid, None)
                g["state"] = "pending"
                self.q.put(("ready", gid, g["token"], time.monotonic(), _Done()))

    def control_plane(self) -> None:
        try:
            nodes = self.ray.nodes()
            if time.monotonic() >= self.next_table:
                # The GCS table keeps removed groups too: reading it all costs more as a run goes.
                t0 = time.monotonic()
                states: dict[str, int] = {}
                for row in self._table().values():
                    states[row["state"]] = states.get(row["state"], 0) + 1
                    if row["state"] == "PENDING" and row.get("stats", {}).get("scheduling_state") == "INFEASIBLE":
                        states["INFEASIBLE"] = states.get("INFEASIBLE", 0) + 1
                self.gcs_states = states
                self.next_table = time.monotonic() + max(TABLE_EVERY_S, 20 * (time.monotonic() - t0))
        except Exception as e:  # noqa: BLE001
            self.send(ev="error", error=f"cp: {e!r}"[:300])
            return
        states = self.gcs_states
        fleet = [n for n in nodes if (n.get("NodeID") in self.fleet_ids if self.fleet_ids is not None
                                      else n.get("NodeName") != HEAD_NAME)]
        alive = [n for n in fleet if n.get("Alive")]
        for n in fleet:
            if not n.get("Alive") and n.get("NodeID") in self.dead_unseen:
                self.dead_unseen.discard(n["NodeID"])
                self.send(ev="node_marked_dead", node_id=n["NodeID"], t=time.monotonic())
        self.send(ev="cp", t=time.monotonic(), raylets_alive=len(alive), raylets_dead=len(fleet) - len(alive),
                  gpus_alive=sum(int(n.get("Resources", {}).get("GPU", 0)) for n in alive),
                  gcs_groups=states, groups_created=self.created, groups_removed=self.removed)

    def poll_groups(self) -> None:
        """Observe role: the run's groups as the GCS lists them, one message per change. A name the
        owner created again (its old group REMOVED, a new one under the same name) is the new one."""
        try:
            table = self._table()
        except Exception as e:  # noqa: BLE001
            self.send(ev="error", error=f"poll: {e!r}"[:300])
            return
        t = time.monotonic()
        rows: dict[int, dict[str, Any]] = {}
        for row in table.values():
            name = row.get("name") or ""
            tail = name[len(self.prefix):] if name.startswith(self.prefix) else ""
            if tail.isdigit() and (int(tail) not in rows or rows[int(tail)]["state"] == "REMOVED"):
                rows[int(tail)] = row
        for gid, row in rows.items():
            key = (row["placement_group_id"], row["state"])
            if self.seen.get(gid) == key:
                continue
            self.seen[gid] = key
            by_bundle = row.get("bundles_to_node_id") or {}
            st = row.get("stats") or {}
            self.send(ev="seen", id=gid, t=t, pg=key[0], state=key[1],
                      nodes=[by_bundle[i] for i in sorted(by_bundle)] if key[1] == "CREATED" else [],
                      sched_ms=st.get("scheduling_latency_ms"), e2e_ms=st.get("end_to_end_creation_latency_ms"),
                      attempts=st.get("scheduling_attempt"))
        for gid, (pg, state) in list(self.seen.items()):
            if gid not in rows and state != "GONE":
                self.seen[gid] = (pg, "GONE")
                self.send(ev="seen", id=gid, t=t, pg=pg, state="GONE", nodes=[])

    # -- loop -------------------------------------------------------------------------------
    def run(self) -> None:
        next_cp = 0.0 if self.role != "submit" else float("inf")
        next_poll = 0.0 if self.role == "observe" else float("inf")
        next_watch = 0.0
        while True:
            mono = time.monotonic()
            wake = min(next_cp, next_poll, next_watch if self.watch else float("inf"),
                       self.timers[0][0] if self.timers else float("inf"))
            try:
                item = self.q.get(timeout=max(0.0, min(wake - mono, 0.5)))
            except queue.Empty:
                item = None
            if item is not None:
                if item[0] == "ready":
                    self.on_ready(*item[1:])
                elif item[0] == "member":
                    self.member_done(*item[1:])
                elif item[0] == "cmd":
                    if not self.command(item[1]):
                        return
            self.finish_due()
            mono = time.monotonic()
            if self.watch and mono >= next_watch:
                self.poll_watched()
                next_watch = mono + WATCH_EVERY_S
            if mono >= next_poll:
                self.poll_groups()
                next_poll = time.monotonic() + POLL_S
            if mono >= next_cp:
                self.control_plane()
                next_cp = mono + CP_EVERY_S

    def command(self, msg: dict[str, Any]) -> bool:
        op = msg["op"]
        if op == "submit":
            self.create(int(msg["id"]), {"bundles": msg["bundles"], "strategy": msg["strategy"],
                                         "hold_s": msg["hold_s"], "labels": msg.get("labels")})
        elif op == "prefill":
            self.create(int(msg["id"]), {"bundles": msg["bundles"], "strategy": "STRICT_PACK",
                                         "hold_s": msg.get("hold_s"), "pin": msg.get("pin")})
        elif op == "fleet":
            self.fleet_ids = set(msg["node_ids"])
        elif op == "evict":
            self.evict(int(msg["id"]))
        elif op == "requeue":
            self.evict(int(msg["id"]), report=False)
        elif op == "start":
            self.start_members(int(msg["id"]), int(msg["placement"]), [float(t) for t in msg["ready_at"]])
        elif op == "node_dead":
            self.node_dead(msg["node_id"], float(msg["t"]))
        elif op == "stop":
            return False
        return True

    def close(self) -> dict[str, Any]:
        """Remove every group this driver created (RealRay counts what the GCS still holds)."""
        self.members.kill_all()
        held = [gid for gid, g in self.groups.items() if "pg" in g]
        for gid in held:
            self.remove(gid)
        self.ray.shutdown()
        return {"removed_at_stop": len(held)}


class _Done:
    """Stands in for a resolved ready() future when a rescheduled group is CREATED again."""

    def exception(self):
        return None


def _reader(q: queue.Queue) -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            q.put(("cmd", json.loads(line)))
    q.put(("cmd", {"op": "stop"}))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = {"--label": "gangstorm", "--role": "all"}
    while len(argv) >= 3 and argv[-2] in flags:
        flags[argv[-2]] = argv[-1]
        del argv[-2:]
    if len(argv) != 1 or flags["--role"] not in ("all", "submit", "observe"):
        print("usage: python -m fakes.ray.driver GCS_ADDRESS [--label RUN_LABEL] [--role all|submit|observe]",
              file=sys.stderr)
        return 2
    label = flags["--label"]
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)       # whatever Ray prints goes to the log, not into the protocol
    w = None
    try:
        w = Worker(argv[0], out, label, flags["--role"])
        threading.Thread(target=_reader, args=(w.q,), daemon=True).start()
        out.write(json.dumps({"ev": "hello", "pid": os.getpid()}) + "\n")
        out.flush()
        w.run()
    except Exception as e:  # noqa: BLE001
        out.write(json.dumps({"ev": "error", "error": f"{type(e).__name__}: {e}"[:500], "fatal": True}) + "\n")
        out.flush()
        return 1
    finally:
        final: dict[str, Any] = {}
        if w is not None:
            try:
                final = w.close()
            finally:
                out.write(json.dumps({"ev": "stopped", **final}) + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
