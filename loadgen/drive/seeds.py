"""A run over several seeds: each seed a complete run in <out>/seeds/<seed>/, seeds side by side.

Which seeds: `--seeds N` runs the scenario's seed and the next N-1 (seed 42: 42, 43, ..., 41+N), so
the one-seed run of the scenario is the first of them; `--seeds a,b,c` runs those. Each seed replays
its own plan (plan_run of the scenario with that seed) on every scheduler, exactly as
`gangstorm run --seed S` does, so a seed gives the same files alone or among others.

How: a simulated seed is CPU-bound, so each runs in its own forked process, at most `parallel` at
once (default os.cpu_count()). A real backend starts its control plane and fleet on this machine:
its seeds run one after another in this process, never side by side.

Consistency: the run folder is created whole with a summary.json naming the planned seeds before
any seed starts; each seed folder is a normal run folder (storage.RunStore's guarantees); the run's
summary.json is rewritten when a seed starts and when it ends, from the completed seeds' own
summary.json files (output.aggregate), so at every moment it names the seeds completed and
running, and its figures are those of exactly the completed seeds. Interrupted, it keeps what
finished: "complete": false and `seeds.interrupted` lists the seeds that were cut short.
"""
from __future__ import annotations

import json
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from loadgen.input.plan import plan_run
from loadgen.input.scenario import Scenario
from loadgen.measure.spread import MAX_EXACT
from loadgen.model.errors import BackendError, UserError
from loadgen.model.signals import signals_held
from loadgen.output import aggregate, storage
from loadgen.output import markdown as report
from loadgen.output.storage import RunStore, fresh_run_dir, new_run_id
from loadgen.output.summary import header

MAX_SEEDS = MAX_EXACT          # the exact rank tests enumerate at most this many values a side
SEEDS_DIR = "seeds"
STOP_WAIT_S = 15.0             # a stopped seed's process gets this long to write its partial summary
Event = Callable[..., None]    # (kind, seed, *detail): start, progress, done, stopped


DIGITS = re.compile(r"[0-9]+")


class SeedsError(UserError):
    """A bad --seeds / --jobs value: one line naming the flag, exit status 2."""


def parse_seeds(text: str | int | list, first: int, flag: str = "--seeds") -> list[int]:
    """`N` (the scenario's seed `first` and the next N-1) or `a,b,c` (those seeds, each once) as a list."""
    what = (f"expected a count 1 to {MAX_SEEDS} (the scenario's seed and the next ones) or a comma-separated "
            f"list of distinct seeds (integers >= 0)")
    listed = isinstance(text, list | tuple)
    if listed:
        items = [str(x) for x in text]
        text = ",".join(items)
    else:
        items = str(text).split(",")
        listed = len(items) > 1
    if not items or not all(DIGITS.fullmatch(i.strip()) for i in items):
        raise SeedsError(f"{flag}: {what}, got {str(text)!r}")
    values = [int(i) for i in items]
    if not listed:
        n = values[0]
        if n < 1:
            raise SeedsError(f"{flag}: {what}, got {str(text)!r}")
        if n > MAX_SEEDS:
            raise SeedsError(f"{flag}: expected at most {MAX_SEEDS} seeds (the exact rank tests' limit), got {n}")
        return [first + k for k in range(n)]
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise SeedsError(f"{flag}: expected each seed once, got {', '.join(map(str, twice))} twice in {str(text)!r}")
    if len(values) > MAX_SEEDS:
        raise SeedsError(f"{flag}: expected at most {MAX_SEEDS} seeds (the exact rank tests' limit), got {len(values)}")
    return values


def seeds_rule(seeds: list[int], first: int, counted: bool) -> str:
    if counted:
        return (f"the scenario's seed {first} and the next {len(seeds) - 1}" if len(seeds) > 1
                else f"the scenario's seed {first}")
    return "as listed"


def parse_parallel(text, backend: str, n_seeds: int, flag: str = "--jobs") -> int:
    """How many seeds run at once: the given bound, else the CPU count; a real backend: 1."""
    if text is None:
        return 1 if backend == "real" or not FORK else max(1, min(os.cpu_count() or 1, n_seeds))
    s = str(text).strip()
    if not DIGITS.fullmatch(s) or int(s) < 1:
        raise SeedsError(f"{flag}: expected a positive integer (seeds run at once), got {str(text)!r}")
    if backend == "real" and int(s) > 1:
        raise SeedsError(f"{flag}: a real backend runs one seed at a time (each seed starts its own control plane "
                         f"and fleet on this machine); drop {flag} or use --backend sim")
    return max(1, min(int(s), n_seeds))


FORK = "fork" in multiprocessing.get_all_start_methods()


@dataclass
class Outcome:
    seed: int
    status: str                 # done, interrupted, user (bad input), backend, crash
    message: str = ""
    wall_s: float = 0.0


def _die_with_parent() -> None:
    """Linux: this child gets SIGTERM when the process that forked it dies (a kill -9 of the
    parent leaves no seed running); elsewhere a no-op."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)          # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _send(conn, msg) -> None:
    try:
        conn.send(msg)
    except (OSError, ValueError):
        pass                    # the parent is gone or stopped listening: nothing to tell


def _attempt(seed: int, work, progress) -> Outcome:
    t0 = time.monotonic()
    try:
        work(seed, progress)
        return Outcome(seed, "done", "", time.monotonic() - t0)
    except KeyboardInterrupt:
        return Outcome(seed, "interrupted", "", time.monotonic() - t0)
    except UserError as e:
        return Outcome(seed, "user", str(e), time.monotonic() - t0)
    except BackendError as e:
        return Outcome(seed, "backend", str(e), time.monotonic() - t0)
    except Exception:           # noqa: BLE001 (reported to the parent, which raises it)
        return Outcome(seed, "crash", traceback.format_exc(), time.monotonic() - t0)


def _child(conn, work, seed: int, parent: int) -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})   # forked while the parent held them
    _die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
    last: dict = {}

    def progress(*detail) -> None:
        key, frac = detail[0], detail[-1]
        if isinstance(frac, float) and key in last and frac < 1.0 and frac - last[key] < 0.02:
            return
        last[key] = frac if isinstance(frac, float) else 0.0
        _send(conn, ("progress", seed, *detail))

    out = _attempt(seed, work, progress)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})    # the outcome must reach the parent
    _send(conn, ("final", out))
    conn.close()


def _raise_for(out: Outcome, noun: str = "seed") -> None:
    if out.status == "interrupted":
        raise KeyboardInterrupt
    if out.status == "user":
        raise SeedsError(f"{noun} {out.seed}: {out.message}")
    if out.status == "backend":
        raise BackendError(f"{noun} {out.seed}: {out.message}")
    raise RuntimeError(f"{noun} {out.seed} failed:\n{out.message}")


def each_seed(seeds: list[int], work: Callable, parallel: int, on_event: Event, in_process: bool = False,
              noun: str = "seed") -> None:
    """work(seed, progress) for every seed, at most `parallel` at once, each in a forked child
    (in_process: one after another in this process). on_event gets ("start", seed),
    ("progress", seed, *detail), ("done", seed, Outcome) and ("stopped", seed, Outcome). The first
    seed that fails stops the others, and its error is raised here: UserError, BackendError,
    KeyboardInterrupt (interrupted) or RuntimeError with the child's traceback. `seeds` may be any
    distinct integers (a sweep passes its cells' indices); `noun` names them in those errors."""
    if in_process or not FORK:
        for s in seeds:
            on_event("start", s)
            out = _attempt(s, work, lambda *d, s=s: on_event("progress", s, *d))
            on_event("done" if out.status == "done" else "stopped", s, out)
            if out.status != "done":
                _raise_for(out, noun)
        return
    ctx = multiprocessing.get_context("fork")
    pending = list(seeds)
    running: dict[int, tuple] = {}            # seed -> (process, connection)
    failed: Outcome | None = None
    try:
        while pending or running:
            # the bookkeeping is done with signals held, so an interrupt finds every started seed
            # in `running` (and the summary); only the wait below takes them as they come
            with signals_held():
                while pending and len(running) < parallel and failed is None:
                    s = pending.pop(0)
                    r, w = ctx.Pipe(duplex=False)
                    p = ctx.Process(target=_child, args=(w, work, s, os.getpid()), name=f"gangstorm-{noun}-{s}")
                    on_event("start", s)
                    p.start()
                    w.close()
                    running[s] = (p, r)
            if not running:
                break
            by_conn = {r: s for s, (_, r) in running.items()}
            ready = multiprocessing.connection.wait(list(by_conn))
            with signals_held():
                for conn in ready:
                    s = by_conn[conn]
                    out = _receive(conn, s, on_event)
                    if out is None:
                        continue
                    _finish(running.pop(s), out, on_event)
                    if out.status != "done" and failed is None:
                        failed = out
                        _stop(running, on_event)
        if failed is not None:
            _raise_for(failed, noun)
    except KeyboardInterrupt:
        _stop(running, on_event)
        raise
    finally:
        _stop(running, on_event)


def _receive(conn, seed: int, on_event: Event) -> Outcome | None:
    """The next message of a child: progress (None returned) or its outcome; a child that ended
    without one (killed) is a crash with its exit status."""
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        return Outcome(seed, "crash", "its process ended without a result")
    if msg[0] == "progress":
        on_event("progress", *msg[1:])
        return None
    return msg[1]


def _finish(entry: tuple, out: Outcome, on_event: Event) -> None:
    p, conn = entry
    p.join()
    conn.close()
    if out.status == "crash" and p.exitcode:
        out.message += f" (exit status {p.exitcode})"
    on_event("done" if out.status == "done" else "stopped", out.seed, out)


def _stop(running: dict[int, tuple], on_event: Event) -> None:
    """SIGTERM every running seed (it ends as an interrupted run: partial and consistent), wait for
    each to report, SIGKILL what does not end in time. Signals wait until this is done."""
    if not running:
        return
    with signals_held():
        for p, _ in running.values():
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for s, (p, conn) in list(running.items()):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
            out = None
            while out is None and conn.poll():
                out = _receive(conn, s, lambda *a: None)
            if out is None or out.status == "crash":      # ended by the stop itself
                out = Outcome(s, "interrupted", "", out.wall_s if out else 0.0)
            _finish((p, conn), out, on_event)
            del running[s]


def cut_short(seeds: dict) -> None:
    """At the end, a seed still listed as running was cut short (an interrupt between its start
    and its first report): it is interrupted."""
    seeds["interrupted"] = sorted(set(seeds["interrupted"]) | set(seeds["running"]))
    seeds["running"] = []


# --- gangstorm run --seeds ---------------------------------------------------------------------
def tally(seeds: dict, per_seed: dict, result_file: Callable[[int], Path], write: Callable[[], None],
          on_event: Event | None = None) -> Event:
    """The each_seed callback that keeps a folder's `seeds` block (running, completed, interrupted,
    failed with its last line) and `per_seed` (each completed seed's result file, read) up to date,
    calling write() after every change, then on_event."""
    def event(kind: str, seed: int, *detail) -> None:
        if kind == "start":
            seeds["running"].append(seed)
            write()
        elif kind in ("done", "stopped"):
            seeds["running"].remove(seed)
            outcome: Outcome = detail[0]
            if kind == "done":
                per_seed[seed] = json.loads(result_file(seed).read_text())
                seeds["completed"] = sorted(per_seed)
            elif outcome.status == "interrupted":
                seeds["interrupted"].append(seed)
            else:
                seeds["failed"][str(seed)] = (outcome.message.strip().splitlines() or [outcome.status])[-1]
            write()
        if on_event:
            on_event(kind, seed, *detail)
    return event


def seed_dir(out: Path, seed: int) -> Path:
    return Path(out) / SEEDS_DIR / str(seed)


def run_seeds(scenario: Scenario, seeds: list[int], opts, parallel: int, rule: str = "as listed",
              on_event: Event | None = None) -> dict:
    """Every scheduler on every seed (opts: comparative.RunOptions for the whole run); the run's
    summary.json aggregates the seeds (output.aggregate). Returns it, with "_dir" set."""
    from loadgen.drive.comparative import add_to_index, in_results_root, run, write_report
    t0, started = time.monotonic(), time.time()
    per_scenario = {s: scenario.with_overrides(seed=s) for s in seeds}
    first = None
    for s in seeds:                     # every seed's input checked before anything is written
        plan = plan_run(per_scenario[s], opts.trace)
        first = first or plan
    run_id = new_run_id(scenario.name)
    out = Path(opts.out_dir) if opts.out_dir else fresh_run_dir(opts.results_root, run_id)
    head = header(run_id, per_scenario[seeds[0]], first)
    head["seed"] = None
    head["seeds"] = {"planned": list(seeds), "completed": [], "running": [], "interrupted": [], "failed": {},
                     "rule": rule, "parallel": parallel, "folders": f"{SEEDS_DIR}/<seed>/"}
    del first
    store = RunStore.create(out, aggregate.over_seeds(head, {}))
    if opts.on_start:
        opts.on_start(out)
    per_seed: dict[int, dict] = {}
    state = {"summary": head}

    def write() -> None:
        s = aggregate.over_seeds(head, per_seed)
        s["wall_s"] = round(time.monotonic() - t0, 3)
        store.write_summary(s)
        store.write_text("summary.md", report.render(s))
        state["summary"] = s

    def work(seed: int, progress) -> None:
        run(per_scenario[seed], replace(opts, out_dir=seed_dir(out, seed), progress=progress, report=False,
                                        on_start=None))

    event = tally(head["seeds"], per_seed, lambda seed: seed_dir(out, seed) / "summary.json", write, on_event)

    try:
        each_seed(seeds, work, parallel, event, in_process=opts.backend == "real")
        head["complete"] = True
    finally:
        cut_short(head["seeds"])
        write()
        storage.CREATED.append(out)     # the CLI's closing line names the run, not its last seed
    summary = state["summary"]
    summary["_dir"] = str(out)
    if in_results_root(out, opts.results_root):
        add_to_index(Path(opts.results_root), summary, out, started)
    if opts.report:
        write_report(out)
    return summary
