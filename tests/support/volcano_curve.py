"""A cost-curve file (fakes/volcano/costcurve.py's layout) made from chosen session costs, so a fit
can be checked against the costs that produced it."""
from loadgen.calibration.volcano_curve import to_find


def _ps(e2e_ms: float, allocate_ms: float, sessions: int) -> dict:
    return {"sessions": sessions, "e2e_ms": e2e_ms, "e2e_n": sessions,
            "action_allocate_ms": allocate_ms, "action_allocate_n": sessions}


def curve(nodes: int, base_ms: float, per_node_us: float, per_task_us: float, reject_us: float,
          feasible_us: float, pending=(100, 1000), light_jobs: int = 60, sessions: int = 10) -> dict:
    """Idle sessions cost base + per node; a light stream's allocate adds numNodesToFind x feasible
    per job placed (spread over 2 x light_jobs sessions); P pending unplaceable tasks add P x
    (per task + nodes x reject), the walk being allocate's."""
    idle = base_ms + per_node_us * nodes / 1000.0
    light_sessions = 2 * light_jobs
    place_ms = to_find(nodes) * feasible_us / 1000.0
    walk = [p * nodes * reject_us / 1000.0 for p in pending]
    return {"scheduler": "volcano", "nodes": nodes, "command": "synthetic", "metrics": {
        "idle": {"jobs": 0, "per_session": _ps(idle, 0.0, sessions)},
        "light": {"jobs": light_jobs, "rate_per_s": 2.0, "bound": light_jobs,
                  "per_session": _ps(idle, place_ms * light_jobs / light_sessions, light_sessions)},
        "pending": [{"jobs": p, "pending_tasks": p,
                     "per_session": _ps(idle + p * per_task_us / 1000.0 + w, w, sessions)}
                    for p, w in zip(pending, walk)]}, "sim": {}}


def running(nodes: int, idle_ms: float, per_running_us: float, counts=(500, 1500), sessions: int = 8) -> dict:
    """A running-phase file (costcurve.py --running): R one-pod jobs running add R x per_running_us."""
    return {"scheduler": "volcano", "nodes": nodes, "command": "synthetic running", "metrics": {
        "idle": {"jobs": 0, "per_session": _ps(idle_ms, 0.0, sessions)},
        "running": [{"jobs": r, "running_tasks": r, "per_session": _ps(idle_ms + r * per_running_us / 1000.0, 0.0,
                                                                        sessions)} for r in counts]}, "sim": {}}
