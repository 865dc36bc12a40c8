"""summary.md: the head-to-head table, rendered from summary.json alone (a run over several seeds:
markdown_seeds.py)."""
from __future__ import annotations

from loadgen.model.numbers import fixed


def render(summary: dict) -> str:
    if summary.get("spread") is not None:          # a run over several seeds (output/aggregate.py)
        from loadgen.output.markdown_seeds import render as render_seeds
        return render_seeds(summary)
    wl = summary["workload"]
    fl = summary["fleet"]
    lines = [
        f"# gangstorm run {summary['run_id']}",
        "",
        f"Scenario `{summary['scenario']}`, seed {summary['seed']}, "
        f"{fl['nodes']:,} nodes x {fl['gpus_per_node']} GPUs (leaf {fl['leaf_size']}), "
        f"{wl['jobs']:,} jobs over {summary['duration_h']} h at {wl['churn_multiplier']:g}x churn "
        f"({wl['arrival_rate_per_s']:.3f} jobs/s, offered load {wl['offered_load']:.2f}). "
        f"{'Complete' if summary['complete'] else 'INCOMPLETE (partial result)'}; wall {summary['wall_s']:.1f} s.",
        "",
        "| scheduler | backend | admitted | never admitted | admission p50 s | p99 s | p99.9 s (n) | max s "
        "| alloc util | fragmentation | partial-gang GPU-h | sched. tax | $ per 1M GPU-h |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in summary["schedulers"].items():
        a = s["admission_s"]
        lines.append(
            f"| {name}{' (partial)' if s.get('partial') else ''} | {s['backend']} | {s['jobs']['admitted']:,} "
            f"| {s['jobs']['never_admitted']:,} "
            f"| {fixed(a['p50'], 2)} | {fixed(a['p99'], 1)} | {fixed(a['p999'], 1)} ({a['count']:,}) | "
            f"{fixed(a['max'], 1)} "
            f"| {s['alloc_util']:.3f} | {s['fragmentation']:.4f} | {s['partial_gang_gpu_hours']:,.1f} "
            f"| {s['scheduling_tax']['tax'] * 100:.2f}% | {fixed(s['cost_per_million_gpu_hours'], 0)} |")
    lines += refusal_lines(summary)
    lines += ["", "Admission by class (p50 / p99 / p99.9 seconds, count):", ""]
    classes = sorted({c for s in summary["schedulers"].values() for c in s["by_class"]})
    lines.append("| scheduler | " + " | ".join(classes) + " |")
    lines.append("|---|" + "---|" * len(classes))
    for name, s in summary["schedulers"].items():
        cells = []
        for c in classes:
            a = s["by_class"].get(c, {}).get("admission_s")
            cells.append("n/a" if not a or not a["count"] else
                         f"{fixed(a['p50'], 1)} / {fixed(a['p99'], 1)} / {fixed(a['p999'], 1)} ({a['count']:,})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += budget_lines(summary)
    lines += sharing_lines(summary)
    placed = {n: s["placement"] for n, s in summary["schedulers"].items() if s.get("placement")}
    if placed:
        lines += ["", "Placement of multi-node gangs (first admission; GPU-hours over every run):", "",
                  "| scheduler | gangs | leaves spanned mean / p99 / max | large gangs in one leaf | "
                  "cross-leaf GPU-h | cross-spine GPU-h |", "|---|---:|---:|---:|---:|---:|"]
        for n, q in placed.items():
            span = q["leaves_spanned"]
            spans = ("n/a" if not span
                     else f"{fixed(span['mean'], 2)} / {fixed(span['p99'], 0)} / {fixed(span['max'], 0)}")
            share, large = q["large_in_one_leaf_share"], q["large_gangs_placed"]
            one_leaf = "n/a" if share is None else f"{share * 100:.1f}% of {large:,}"
            lines.append(f"| {n} | {q['gangs_placed']:,} | {spans} | {one_leaf} | "
                         f"{q['cross_leaf_gpu_hours']:,.1f} | {q['cross_spine_gpu_hours']:,.1f} |")
        topo = {n: s.get("topology") for n, s in summary["schedulers"].items() if s.get("topology")}
        if topo:
            lines += ["", "Topology settings: " + "; ".join(
                f"{n}: " + ", ".join(f"{k}={v}" for k, v in t.items() if k != "note") for n, t in topo.items())]
    lines += prometheus_lines(summary)
    models = {n: s["model"] for n, s in summary["schedulers"].items() if s.get("model")}
    if models:
        prof = summary.get("profile", {})
        lines += ["",
                  f"Simulated schedulers timed by calibration profile `{prof.get('name')}` ({prof.get('path')}):", ""]
        for n, m in models.items():
            if m["calibrated"]:
                text = "calibrated, " + held_out_text(m["held_out_error"])
            else:
                text = "UNCALIBRATED: " + m["note"].split(": ", 1)[1]
            if m.get("set_by_scenario"):
                text += "; set by the scenario: " + ", ".join(m["set_by_scenario"])
            lines.append(f"- **{n}**: {text}")
    slo = summary.get("slo", {})
    if slo:
        lines += ["", f"SLO: admission p99 <= {slo.get('admission_p99_s')} s. "
                  + ", ".join(f"{n}: {'met' if s.get('slo_met') else 'MISSED'}"
                              for n, s in summary["schedulers"].items())]
    lines += ["", "Control plane (final figures):", ""]
    for name, s in summary["schedulers"].items():
        cp = {k: v for k, v in s.get("control_plane", {}).items() if not isinstance(v, (list, dict))}
        lines.append(f"- **{name}**: " + ", ".join(f"{k}={v}" for k, v in cp.items()))
        if fk := s.get("control_plane", {}).get("fakelets"):
            front = "health checks and load polls answered by fakelet-front (Go), " if fk.get("front") == "go" else ""
            lines.append(f"  - fakelets (fake raylets, docs/ray-fakelets.md): {fk.get('nodes')} in "
                         f"{fk.get('processes')} processes, {fk.get('alive')} alive at the end "
                         f"({fk.get('false_deaths')} declared dead by the GCS while answering), resource-view streams "
                         f"{'one per node' if fk.get('syncer') == 'node' else 'one per process'}, "
                         f"{front}boot {fk.get('boot_s')} s, event-loop lag max "
                         f"{fk.get('loop_lag_max_s')} s, calls not answered: {fk.get('unimplemented') or 'none'}")
        for q, f in (s.get("control_plane", {}).get("queues") or {}).items():
            # a scheduler's own queues (Kueue's ClusterQueues): its admission, from queued to admitted
            adm = f.get("admission_s") or {}
            lines.append(f"  - queue {q}: {f.get('workloads_admitted')} admitted, queued -> admitted p50 "
                         f"{adm.get('p50', '-')} / p99 {adm.get('p99', '-')} s, nominal {f.get('nominal_gpus')} GPUs, "
                         f"borrowed at most {f.get('borrowed_gpus_max')}, evicted {f.get('evictions')}")
    lines += ["", "Alloc util is time-averaged GPUs bound to jobs over the post-warm-up window; fragmentation is "
              "the time-averaged share of all GPUs that are free but unusable by the smallest pending member; "
              "scheduling tax = (GPU-hours held by partial gangs + GPU-hours of runs cut short by evictions or node "
              "failures) / GPU-hours allocated, measured in the run; "
              "cost = price / (alloc util x active util) / (1 - scheduling tax) x 1e6.", ""]
    return "\n".join(lines)


def sharing_lines(summary: dict) -> list[str]:
    """The GPU-sharing table (fleets with node pools): slice-granular allocation, ATC '23
    fragmentation, stranded capacity and cost by slice price."""
    shared = {n: s["gpu_sharing"] for n, s in summary["schedulers"].items() if s.get("gpu_sharing")}
    if not shared:
        return []
    w = next(iter(shared.values()))["slice_memory_weight"]
    lines = ["", "GPU sharing (slice granularity, time averages over the window; docs/gpu-sharing.md):", "",
             "| scheduler (placement policy) | allocation (compute) | allocation (memory) | fragmentation (ATC '23) "
             "| stranded "
             f"| $ per 1M GPU-h, slices by compute | by memory | at w={w:g} |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n, g in shared.items():
        by = g["cost_per_million_gpu_hours_by"]
        lines.append(f"| {n} ({g.get('placement_policy', '-')}) | {g['allocation_ratio'] * 100:.1f}% "
                     f"| {g['allocation_ratio_memory'] * 100:.1f}% "
                     f"| {g['fragmentation_ratio'] * 100:.2f}% | {g['stranded_ratio'] * 100:.2f}% "
                     f"| {fixed(by['compute'], 0)} | {fixed(by['memory'], 0)} "
                     f"| {fixed(g['cost_per_million_gpu_hours'], 0)} |")
    return lines


REFUSALS_HEAD = "Jobs refused or failed (not in the admission figures; jobs.csv `reason` names each):"


def refusals(summary: dict) -> list[tuple[str, str, list[str]]]:
    """Per scheduler that lost jobs to a refusal or a failure: (name, the counts by reason, the
    cluster's first words for each reason where the backend kept them). The tails stand on admitted
    jobs only, so a run that lost a share of its jobs this way must say so next to them."""
    out = []
    for name, s in summary["schedulers"].items():
        jobs = s["jobs"]
        if not jobs.get("rejected", 0) + jobs.get("failed", 0):
            continue
        reasons = ", ".join(f"{r or 'no reason'} x{n:,}" for r, n in sorted((s.get("failure_reasons") or {}).items(),
                                                                            key=lambda kv: (-kv[1], kv[0])))
        head = (f"{jobs.get('rejected', 0):,} rejected and {jobs.get('failed', 0):,} failed of "
                f"{jobs['submitted']:,} submitted ({reasons})")
        first_refusal = (s.get("control_plane") or {}).get("first_refusal") or {}
        first = [f"first {r}: {m}" for r, m in sorted(first_refusal.items())]
        out.append((name, head, first))
    return out


def refusal_lines(summary: dict) -> list[str]:
    lines = []
    for name, head, first in refusals(summary):
        lines.append(f"- **{name}**: {head}")
        lines += [f"  - {f}" for f in first]
    return ["", REFUSALS_HEAD, ""] + lines if lines else []


BUDGET_NAMES = {"admission": "admission", "placement_to_ready": "placement-to-ready",
                "rendezvous": "rendezvous", "time_to_training": "time-to-training"}


def budget_lines(summary: dict) -> list[str]:
    """The three budgets after submission and their sum, per scheduler and class, and what the GPUs
    admitted gangs held did (measured SM activity, failed starts)."""
    runs = {n: s for n, s in summary["schedulers"].items() if s.get("budgets")}
    if not runs:
        return []
    classes = sorted({c for s in runs.values() for c in s["budgets"]["admission"] if c != "all"})
    lines = ["", "Budgets from submission to training (p50 / p99 / p99.9 seconds, count):", "",
             "| scheduler | budget | all | " + " | ".join(classes) + " |",
             "|---|---|" + "---:|" * (len(classes) + 1)]
    for name, s in runs.items():
        for key, label in BUDGET_NAMES.items():
            cells = []
            for c in ["all", *classes]:
                a = s["budgets"][key].get(c)
                cells.append("n/a" if not a or not a["count"] else
                             f"{fixed(a['p50'], 1)} / {fixed(a['p99'], 1)} / {fixed(a['p999'], 1)} ({a['count']:,})")
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    lines += ["",
              "| scheduler | measured active util | training SM activity | failed starts (jobs) | admitted, "
              "never trained |",
              "|---|---:|---:|---:|---:|"]
    for name, s in runs.items():
        a = s["activity"]
        lines.append(f"| {name} | {fixed(a['active_util'], 3)} | {a['training_sm_active']:.3f} | "
                     f"{a['start_failures']:,} ({a['jobs_with_failed_starts']:,}) | {a['never_trained']:,} |")
    return lines


def prometheus_lines(summary: dict) -> list[str]:
    """The seed's queries as a real Prometheus answered them, beside gangstorm's exact figures."""
    runs = {n: s["prometheus"] for n, s in summary["schedulers"].items() if s.get("prometheus")}
    if not runs:
        return []
    lines = ["", "Prometheus (a real server scraped gangstorm, the fake DCGM exporter and the control plane):", "",
             "| scheduler | quantity | Prometheus | gangstorm exact |", "|---|---|---:|---:|"]
    for n, p in runs.items():
        for key, q in p["queries"].items():
            got = q.get("error") or fixed(q.get("value"), 4)
            lines.append(f"| {n} | {key} | {got} | {fixed(p['exact'].get(key), 4)} |")
        down = [job for job, health in p["targets"].items() if health != "up"]
        if down:
            lines.append(f"| {n} | targets not up at the end | {', '.join(down)} | |")
    return lines


def held_out_text(err: dict) -> str:
    """One line for a profile's held-out validation: the cases, the real/sim ratio ranges, the verdict."""
    def span(v, unit=""):
        return f"{v[0]:g}{unit}" if v[0] == v[1] else f"{v[0]:g} to {v[1]:g}{unit}"
    if "cases" in err:
        parts = [f"{k.removesuffix('_ratio')} {span(err[k])}" for k in ("p50_ratio", "p99_ratio", "p999_ratio")
                 if err.get(k)]
        if err.get("util_diff_pp"):
            parts.append(f"util {span(err['util_diff_pp'], ' pp')}")
        head = f"held out {err['cases']} ({err['real_runs_per_case']} real runs each), real/sim " + ", ".join(parts)
    else:
        head = (f"held-out published figure {err['anchors']}, "
                f"published/sim {span(err['ratio']) if err.get('ratio') else 'n/a'}")
    return head + ("; within" if err.get("within_goal") else "; OUTSIDE") + (
        " the goal band (ratios 0.8-1.25, util 3 pp)") + (f", because {err['because']}" if err.get("because") else "")
