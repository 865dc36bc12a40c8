"""Generated malformed scenarios, traces and flags, and (issue 31) input and output paths of every
kind, hostile names, huge numbers and deep nesting, profiles, kubeconfigs and slurm.conf files, and
run folders for report and compare: every one ends in exit 2 and one line naming the file and
field, or in a complete run (a page without script); never a traceback, a hang, a file outside the
run folder, or a device, FIFO or input replaced.

Examples per property: GANGSTORM_FUZZ_EXAMPLES (default 150; the closing note of issue 12 reports a
run with 2,000). Hypothesis is derandomized so CI sees the same cases on every run.
"""
from __future__ import annotations

import json
import os

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loadgen.input.schema import SCENARIO, Field, ListOf, MapOf
from support.fuzzkit import DEVICE, FIFO, OUTCOMES, Special, run_cli
from support.htmlcheck import assert_no_script, parse
from support.paths import ROOT

EXAMPLES = int(os.environ.get("GANGSTORM_FUZZ_EXAMPLES", "150"))
# No explain phase: it traces every line, which slows the deep-YAML cases past the time bound.
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck), phases=[p for p in Phase if p != Phase.explain])

BASE = {
    "name": "fuzz", "seed": 3, "duration_h": 0.1, "drain_h": 0.05, "warmup_h": 0.0, "sample_every_s": 30,
    "schedulers_enabled": ["slurm", "ray", "kube", "volcano"],
    "fleet": {"nodes": 16, "leaf_size": 4, "gpu_models": {"h100": 1.0}},
    "workload": {"tenants": 3, "classes": {
        "small": {"share": 0.8, "shapes": [{"members": 1, "gpus": 2, "weight": 1.0}], "duration_s": {"median": 300}},
        "large": {"share": 0.2, "shapes": [{"members": 4, "gpus": 8, "weight": 1.0}],
                  "duration_s": {"median": 600, "max": 1200}}}},
    "chaos": [{"kind": "evictions", "at_s": 60, "rate_per_h": 100},
              {"kind": "node_failure", "at_s": 120, "nodes": 2, "recover_after_s": 60},
              {"kind": "etcd_pressure", "at_s": 90, "bytes": 8 * 1024**2, "recover_after_s": 60},
              {"kind": "fragmentation_prefill", "at_s": 0, "fill_fraction": 0.25}],
    "slo": {"admission_p99_s": 60}, "ceiling": {"jobs": 50, "max_points": 2},
}

HOSTILE = st.sampled_from([
    float("nan"), float("inf"), float("-inf"), -1, 0, 0.5, 1e15, 10**30, -(10**30), 1e-300, "x", "", "9" * 5000,
    [], [1, 2], {}, {"a": 1}, None, True, False, "1e5", "nan",
])


def leaf_paths(spec, prefix=()):
    """Every (path, Field) of the schema, through the base scenario's own lists and maps."""
    if isinstance(spec, Field):
        yield prefix, spec
    elif isinstance(spec, dict):
        for k, sub in spec.items():
            yield from leaf_paths(sub, prefix + (k,))
    elif isinstance(spec, ListOf):
        yield from leaf_paths(spec.item, prefix + (0,))
    elif isinstance(spec, MapOf):
        yield from leaf_paths(spec.item, prefix + ("small" if prefix[-1] == "classes" else "h100",))


PATHS = [p for p, _ in leaf_paths(SCENARIO)]


def put(doc, path, value):
    node = doc
    for key in path[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(key, {} if not isinstance(key, int) else [])
        elif isinstance(node, list) and isinstance(key, int):
            while len(node) <= key:
                node.append({"kind": "evictions"})
            node = node[key]
        else:
            return
        if not isinstance(node, (dict, list)):
            return
    if isinstance(node, dict) and not isinstance(path[-1], int):
        node[path[-1]] = value
    elif isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
        node[path[-1]] = value


def dump(doc) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


@st.composite
def mutated_scenario(draw) -> bytes:
    doc = json.loads(json.dumps(BASE))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["leaf", "leaf", "leaf", "unknown", "section", "drop"]))
        path = draw(st.sampled_from(PATHS))
        if op == "leaf":
            put(doc, path, draw(HOSTILE))
        elif op == "unknown":
            put(doc, path[:-1] + (draw(st.sampled_from(["nodez", "Seed", "x-y", "kind "])),), 1)
        elif op == "section" and len(path) > 1:
            put(doc, path[:1], draw(HOSTILE))
        elif op == "drop" and isinstance(doc.get(path[0]), dict):
            doc[path[0]].pop(path[1] if len(path) > 1 else None, None)
    return dump(doc)


def raw_text_cases(draw) -> bytes:
    text = dump(BASE)
    kind = draw(st.sampled_from(["truncate", "bytes", "dupkey", "nonstrkey", "bomb", "deep", "empty", "tabs",
                                 "recursive", "utf16", "nul"]))
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(min_size=1, max_size=40)) + text[at:]
    if kind == "dupkey":
        return text + draw(st.sampled_from([b"seed: 4\n", b"fleet: {nodes: 8}\n", b"name: again\n"]))
    if kind == "nonstrkey":
        return text + draw(st.sampled_from([b"1: x\n", b"on: true\n", b"[a, b]: 1\n", b"null: 3\n", b"2.5: y\n"]))
    if kind == "bomb":
        levels = draw(st.integers(6, 10))
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
        return ("\n".join(lines) + "\n").encode()
    if kind == "deep":
        n = draw(st.integers(100, 3000))
        return b"fleet: " + b"[" * n + b"]" * n + b"\n"
    if kind == "empty":
        return draw(st.sampled_from([b"", b"\n\n", b"# only a comment\n", b"---\n", b"...\n", b"~\n"]))
    if kind == "tabs":
        return text.replace(b"  ", b"\t")
    if kind == "recursive":
        return b"fleet: &f\n  nodes: 16\n  more: *f\n"
    if kind == "utf16":
        return text.decode().encode("utf-16")
    return text.replace(b"fuzz", b"fu\x00zz")


@st.composite
def scenario_bytes(draw) -> bytes:
    return draw(mutated_scenario()) if draw(st.booleans()) else raw_text_cases(draw)


@pytest.mark.slow
@FUZZ
@given(scenario_bytes(), st.sampled_from(["run", "trace-export", "ceiling"]))
def test_generated_scenarios_end_in_one_line_or_a_complete_run(data, command):
    argv = {"run": ["run", "{dir}/s.yaml", "--out", "{dir}/out", "--quiet"],
            "trace-export": ["trace", "export", "{dir}/s.yaml", "{dir}/out/t.jsonl"],
            "ceiling": ["ceiling", "{dir}/s.yaml", "--out", "{dir}/out", "--max-points", "2", "--jobs", "40"]}[command]
    o = run_cli(argv, {"s.yaml": data})
    if o.code == 0 and command == "run":
        assert o.summary["complete"] is True


# --- traces -------------------------------------------------------------------------------------
TRACE_BASE = [{"id": i, "tenant": "t", "cls": "small", "members": m, "gpus_per_member": g, "duration_s": 120.0,
               "submit_s": 10.0 * i, "min_available": m} for i, (m, g) in enumerate([(1, 1), (2, 8), (4, 8), (1, 4)])]
JSON_HOSTILE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e15", "1e400", "-1", "0", "0.5", "\"7\"", "true",
                                "null", "[]", "{}", "99999999999999999999999", "1e-320", "16", "65"])
OPENB_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                "creation_time,deletion_time,scheduled_time\n")


@st.composite
def jsonl_trace(draw) -> bytes:
    lines = ['{"gangstorm_trace": 1}'] + [json.dumps(j) for j in TRACE_BASE]
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(1, len(lines) - 1))
        kind = draw(st.sampled_from(["value", "value", "value", "drop", "garbage", "dupid", "notobject"]))
        if kind in ("value", "drop") and not lines[i].startswith('{"id"'):
            kind = "dupid"
        if kind == "value":
            key = draw(st.sampled_from(sorted(TRACE_BASE[0])))
            row = json.loads(lines[i])
            row[key] = "@@"
            lines[i] = json.dumps(row).replace('"@@"', draw(JSON_HOSTILE))
        elif kind == "drop":
            row = json.loads(lines[i])
            row.pop(draw(st.sampled_from(sorted(row))))
            lines[i] = json.dumps(row)
        elif kind == "garbage":
            lines[i] = draw(st.binary(max_size=30)).decode("latin-1")
        elif kind == "dupid":
            lines.append(lines[i])
        else:
            lines[i] = draw(st.sampled_from(["[1,2]", "3", "\"x\"", "null", "{", ""]))
    body = "\n".join(lines) + "\n"
    return body.encode("latin-1" if draw(st.booleans()) else "utf-8", errors="replace")


@st.composite
def openb_trace(draw) -> bytes:
    rows = [f"p{i},1000,1000,{g},1000,,LS,Running,{100 * i},{100 * i + 500},{100 * i}"
            for i, g in enumerate([1, 2, 8, 4])]
    i = draw(st.integers(0, len(rows) - 1))
    cols = rows[i].split(",")
    col = draw(st.sampled_from([3, 8, 9, 0]))
    cols[col] = draw(st.sampled_from(["nan", "inf", "-inf", "", "-3", "1e400", "x", "2.5", "9", "1e300", "\x00"]))
    rows[i] = ",".join(cols)
    header = draw(st.sampled_from([OPENB_HEADER, "\ufeff" + OPENB_HEADER, "name,num_gpu\n", ""]))
    return (header + "\n".join(rows) + "\n").encode()


SMALL = dump({**BASE, "chaos": []})


@pytest.mark.slow
@FUZZ
@given(st.one_of(jsonl_trace().map(lambda b: ("t.jsonl", b)), openb_trace().map(lambda b: ("t.csv", b))),
       st.sampled_from(["run", "show"]))
def test_generated_traces_end_in_one_line_or_a_complete_run(trace, command):
    name, data = trace
    argv = (["run", "{dir}/s.yaml", "--trace", f"{{dir}}/{name}", "--schedulers", "slurm,kube", "--out", "{dir}/out",
             "--quiet"] if command == "run" else ["trace", "show", f"{{dir}}/{name}"])
    run_cli(argv, {"s.yaml": SMALL, name: data})


# --- flags and output paths ---------------------------------------------------------------------
FLAG_VALUES = st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e9", "1e400", "abc", "", " ", "3", "0.5",
                               "1,2", "kube,kube", "kube,,", "borg", "99999999999999999999"])


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["--nodes", "--seed", "--churn", "--duration-h", "--time-scale",
                                           "--schedulers", "--profile", "--backend"]), FLAG_VALUES),
                min_size=1, max_size=3),
       st.sampled_from(["fresh", "file", "under-file", "non-empty", "read-only"]))
def test_generated_flags_and_output_paths_end_in_one_line_or_a_complete_run(flags, out_kind):
    files = {"s.yaml": SMALL, "f": b"a file\n"}
    out = {"fresh": "{dir}/out", "file": "{dir}/f", "under-file": "{dir}/f/out", "non-empty": "{dir}/old",
           "read-only": "/proc/gangstorm-out"}[out_kind]
    if out_kind == "non-empty":                # a previous run's folder: refused, never mixed into
        files["old/summary.json"] = b'{"complete": true, "schedulers": {"slurm": {}}}\n'
        files["old/jobs.csv"] = b"scheduler,backend,job_id\nslurm,sim,0\n"
    argv = ["run", "{dir}/s.yaml", "--out", out, "--quiet"] + [x for pair in flags for x in pair]
    o = run_cli(argv, files, out_name="out")
    if out_kind != "fresh":
        assert o.code == 2


# --- paths: devices, FIFOs, folders, over-long and empty paths, an input as the output ----------------
# (issue 31) Inputs may also be the machine's own endless devices; an output is only ever a path in
# the sandbox, so a regression could never replace a real device.
INPUT_PATHS = {"fifo": ("p", FIFO), "device": ("p", DEVICE), "folder": ("p/", b""), "missing": ("nothing-here", None),
               "under-a-file": ("f/p", None), "long": ("{long}", None), "empty": ("", None),
               "dev-zero": ("/dev/zero", None), "dev-urandom": ("/dev/urandom", None),
               "dev-stdin": ("/dev/stdin", None),
               "nul-in-name": ("p\x00q", None), "link-to-fifo": ("l", Special("symlink", "{dir}/q")),
               "regular": ("p", b"x: 1\n")}
OUTPUT_PATHS = {"fifo": ("o", FIFO), "device": ("o", DEVICE), "folder": ("o/", b""), "under-a-file": ("f/o", None),
                "long": ("{long}", None), "empty": ("", None), "the-input": ("s.yaml", None),
                "link-to-input": ("l", Special("symlink", "{dir}/s.yaml")), "new": ("new/o", None)}
RUN_FOLDER = {"d/summary.json": json.dumps({"run_id": "r", "schedulers": {}}).encode()}


def _path(kinds: dict, kind: str) -> tuple[str, dict]:
    name, made = kinds[kind]
    files = {"f": b"a file\n"}
    if made is not None:
        files[name] = made
        if isinstance(made, Special) and made.kind == "symlink" and made.target == "{dir}/q":
            files["q"] = FIFO
    return ("" if name == "" else name if name.startswith("/") else "{dir}/" + name), files


@pytest.mark.slow
@FUZZ
@given(st.sampled_from(["scenario", "trace", "profile", "trace-show", "compare", "report", "profile-show",
                        "kubeconfig", "slurm-conf"]), st.sampled_from(sorted(INPUT_PATHS)))
def test_generated_input_paths_end_in_one_line_never_a_wait(role, kind):
    path, files = _path(INPUT_PATHS, kind)
    files["s.yaml"] = SMALL
    base = ["run", "{dir}/s.yaml", "--schedulers", "slurm", "--out", "{dir}/out", "--quiet"]
    argv = {"scenario": ["run", path, "--out", "{dir}/out", "--quiet"], "trace": base + ["--trace", path],
            "profile": base + ["--profile", path], "trace-show": ["trace", "show", path],
            "compare": ["compare", path, path], "report": ["report", path], "profile-show": ["profile", "show", path],
            "kubeconfig": ["run", "{dir}/s.yaml", "--kubeconfig", path, "--dry-run", "--quiet"],
            "slurm-conf": ["run", "{dir}/s.yaml", "--slurm-conf", path, "--dry-run", "--quiet"]}[role]
    o = run_cli(argv, files, codes=(0, 1, 2) if role == "compare" else (0, 2), label=f"input path {kind}")
    if kind not in ("regular", "missing") and role not in ("profile-show", "report") and kind != "folder":
        assert o.code == 2, (role, kind, o.stderr)


@pytest.mark.slow
@FUZZ
@given(st.sampled_from(["run-out", "export", "report-out"]), st.sampled_from(sorted(OUTPUT_PATHS)))
def test_generated_output_paths_never_replace_a_device_a_fifo_or_an_input(role, kind):
    kinds = OUTPUT_PATHS if role != "report-out" else {   # a report's inputs are its run folder's files
        **OUTPUT_PATHS, "the-input": ("d/summary.json", None),
        "link-to-input": ("l", Special("symlink", "{dir}/d/summary.json"))}
    path, files = _path(kinds, kind)
    files.update({"s.yaml": SMALL, **RUN_FOLDER})
    argv = {"run-out": ["run", "{dir}/s.yaml", "--schedulers", "slurm", "--out", path, "--quiet"],
            "export": ["trace", "export", "{dir}/s.yaml", path],
            "report-out": ["report", "{dir}/d", "--out", path]}[role]
    o = run_cli(argv, files, out_name="new", label=f"output path {kind}")
    if kind not in ("new",) and not (kind == "folder" and role == "run-out"):
        assert o.code == 2, (role, kind, o.stderr)     # run-out into an empty folder is allowed


# --- names that reach folders, tables and the page -------------------------------------------------
NAME = st.one_of(st.text(min_size=0, max_size=12), st.sampled_from([
    "../../../x", "a/b", "..", ".", "-rf", "all", "v1.0", "$x^$", "$\\frac{1}{$", 'x"/><script>alert(1)</script>',
    "<img src=x onerror=alert(1)>", "a\x00b", "a\nb", "a\u200bb", "a\u202eb", "a\u2028b", "\ufeff", " ", "x" * 300,
    "javascript:alert(1)", "&amp;", "a|b", "a,b", 'a"b', "\\", "%s%n", "\U0001F600"]))


@pytest.mark.slow
@FUZZ
@given(NAME, NAME, NAME)
def test_generated_names_end_in_one_line_or_a_page_without_script(scenario_name, cls, tenant):
    doc = {**BASE, "chaos": [], "name": scenario_name,
           "workload": {"tenants": 2, "classes": {cls: {"share": 1.0, "shapes": [{"members": 1, "gpus": 2}],
                                                         "duration_s": {"median": 300}}}}}
    trace = ('{"gangstorm_trace": 1}\n' + "".join(json.dumps(
        {"id": i, "members": 1, "gpus_per_member": 1, "duration_s": 60.0, "submit_s": 5.0 * i, "cls": cls,
         "tenant": tenant}) + "\n" for i in range(6))).encode()

    def page(sandbox):
        html = sandbox / "out" / "report.html"
        return html.read_text() if html.is_file() else None
    for extra, files in (([], {"s.yaml": dump(doc)}),
                         (["--trace", "{dir}/t.jsonl"], {"s.yaml": SMALL, "t.jsonl": trace})):
        o = run_cli(["run", "{dir}/s.yaml", "--schedulers", "slurm", "--out", "{dir}/out", "--quiet", *extra], files,
                    keep=page, label="names")
        if o.kept is not None:
            assert_no_script(parse(o.kept))


# --- numbers and nesting in traces, compared summaries and index lines ---------------------------------
BIG = st.one_of(st.integers(15, 6000).map(lambda n: "9" * n), st.integers(1, 400).map(lambda n: f"1e{n}"),
                st.integers(1, 400).map(lambda n: f"-{'9' * n}.5"))
DEEP = st.integers(10, 20000).map(lambda n: "[" * n + "]" * n)
SUMMARY = {"run_id": "r", "complete": True, "schedulers": {"kube": {
    "backend": "sim", "jobs": {"submitted": 4, "admitted": 4, "never_admitted": 0},
    "admission_s": {"p50": 1.0, "p99": 2.0, "p999": 2.0, "max": 2.0, "mean": 1.0, "count": 4},
    "by_class": {"small": {"jobs": 4, "admission_s": {"p50": 1.0, "p99": 2.0, "count": 4}}}}}}


def _plant(doc, value: str, draw) -> str:
    """JSON text of doc with one of its values (or a new key) replaced by the raw text `value`."""
    text = json.dumps(doc)
    spots = [m.start() for m in __import__("re").finditer(r": [^,{}\[\]]+", text)]
    at = spots[draw(st.integers(0, len(spots) - 1))]
    end = min(i for i in (text.find(",", at), text.find("}", at)) if i != -1)
    return text[:at] + ": " + value + text[end:]


@pytest.mark.slow
@FUZZ
@given(st.data(), st.sampled_from(["trace", "compare", "index", "report"]), st.one_of(BIG, DEEP))
def test_generated_huge_numbers_and_deep_nesting_end_in_one_line(data, where, value):
    if where == "trace":
        line = _plant(TRACE_BASE[1], value, data.draw)
        o = run_cli(["trace", "show", "{dir}/t.jsonl"], {"t.jsonl": f'{{"gangstorm_trace": 1}}\n{line}\n'.encode()},
                    label="numbers")
    elif where == "compare":
        o = run_cli(["compare", "{dir}/a.json", "{dir}/b.json", "--json"],
                    {"a.json": json.dumps(SUMMARY).encode(), "b.json": _plant(SUMMARY, value, data.draw).encode()},
                    codes=(0, 1, 2), label="numbers")
        if o.code in (0, 1):
            json.loads(o.stdout, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(c)))
    elif where == "index":
        line = _plant({"run_id": "r", "dir": "ok", "complete": True}, value, data.draw)
        o = run_cli(["compare", "latest", "latest"], {"results/index.jsonl": (line + "\n").encode(),
                                                      "results/ok/summary.json": json.dumps(SUMMARY).encode()},
                    codes=(0, 1, 2), label="numbers")
    else:
        o = run_cli(["report", "{dir}/d"], {"d/summary.json": _plant(SUMMARY, value, data.draw).encode()},
                    label="numbers")


# --- profiles ------------------------------------------------------------------------------------------
REFERENCE = yaml.safe_load((ROOT / "fakes/profiles/reference.yaml").read_text())


def _profile_paths(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield prefix + (k,)
            yield from _profile_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield prefix + (i,)
            yield from _profile_paths(v, prefix + (i,))


PROFILE_PATHS = list(_profile_paths(REFERENCE))


@st.composite
def mutated_profile(draw) -> bytes:
    doc = json.loads(json.dumps(REFERENCE))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PROFILE_PATHS))
        op = draw(st.sampled_from(["value", "value", "drop", "unknown"]))
        node = doc
        for k in path[:-1]:
            present = isinstance(node, (dict, list)) and (k in node if isinstance(node, dict) else k < len(node))
            node = node[k] if present else None
            if node is None:
                break
        if not isinstance(node, (dict, list)):
            continue
        key = path[-1]
        if isinstance(node, list) and key >= len(node):
            continue
        if op == "value":
            node[key] = draw(HOSTILE)
        elif op == "drop" and isinstance(node, dict):
            node.pop(key, None)
        elif isinstance(node, dict):
            node[draw(st.sampled_from(["borg", "Value", "value ", "held_out", "rows"]))] = draw(HOSTILE)
    return dump(doc)


@pytest.mark.slow
@FUZZ
@given(mutated_profile(), st.sampled_from(["run", "show"]))
def test_generated_profiles_end_in_one_line_before_anything_runs(profile, command):
    argv = (["run", "{dir}/s.yaml", "--profile", "{dir}/p.yaml", "--schedulers", "ray,slurm", "--out", "{dir}/out",
             "--quiet"] if command == "run" else ["profile", "show", "{dir}/p.yaml"])
    o = run_cli(argv, {"s.yaml": SMALL, "p.yaml": profile}, label="profiles")
    if o.code == 2 and command == "run":
        assert not o.out.exists()                  # refused before anything ran or was committed


# --- kubeconfigs and slurm.conf ----------------------------------------------------------------------
KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
              "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
              "users": [{"name": "u", "user": {}}]}
KUBE_PATHS = list(_profile_paths(KUBECONFIG))
SERVERS = st.sampled_from(["https://10.0.0.1:6443", "http://[::1]:1", "https://localhost:1", "ftp://127.0.0.1",
                           "https://", "http://[::1", "https://127.0.0.1:99999", "https://127.0.0.1:²", 6443, None,
                           ["https://127.0.0.1:1"], "https://127.0.0.1:1,https://10.0.0.2:1"])
SLURM_LINES = st.lists(st.sampled_from([
    "SlurmctldHost=a(127.0.0.1)", "SlurmctldHost=localhost", "SlurmctldHost=head01", "SlurmctldHost=h(10.0.0.9)",
    "SlurmctldAddr=10.1.1.1", "SlurmctldAddr=127.0.0.2", "ControlMachine=localhost", "ControlAddr=192.168.0.1",
    "BackupController=b BackupAddr=10.9.9.9", "Include inc.conf", "Include /dev/zero", "Include missing.conf",
    "include loop.conf", "ClusterName=x", "# SlurmctldHost=10.0.0.1", "SlurmctldHost=[::1]"]), max_size=6)


@pytest.mark.slow
@FUZZ
@given(st.data(), st.sampled_from(["kubeconfig", "slurm"]))
def test_generated_cluster_configs_are_refused_in_one_line_or_looked_at_read_only(data, kind):
    """A remote address anywhere a client would connect is refused (exit 2); a loopback one gets the
    read-only --dry-run look, which finds nothing listening: one line, exit 1."""
    if kind == "kubeconfig":
        doc = json.loads(json.dumps(KUBECONFIG))
        for _ in range(data.draw(st.integers(1, 2))):
            path = data.draw(st.sampled_from(KUBE_PATHS))
            node = doc
            for k in path[:-1]:
                node = (node[k] if isinstance(node, dict) and k in node or isinstance(node, list) and k < len(node)
                        else None)
                if not isinstance(node, (dict, list)):
                    break
            if isinstance(node, (dict, list)) and (path[-1] in node if isinstance(node, dict)
                                                   else path[-1] < len(node)):
                node[path[-1]] = data.draw(st.one_of(HOSTILE, SERVERS))
        files = {"s.yaml": SMALL, "kc": dump(doc)}
        argv = ["run", "{dir}/s.yaml", "--kubeconfig", "{dir}/kc", "--schedulers", "kube", "--dry-run", "--quiet"]
        if data.draw(st.booleans()):
            argv += ["--etcd-endpoint", str(data.draw(SERVERS))]
    else:
        lines = data.draw(SLURM_LINES)
        files = {"s.yaml": SMALL, "slurm.conf": ("\n".join(lines) + "\n").encode(),
                 "inc.conf": ("\n".join(data.draw(SLURM_LINES)) + "\n").encode(), "loop.conf": b"Include loop.conf\n"}
        argv = ["run", "{dir}/s.yaml", "--slurm-conf", "{dir}/slurm.conf", "--schedulers", "slurm",
                "--dry-run", "--quiet"]
    o = run_cli(argv, files, codes=(0, 1, 2), label=f"{kind} configs")
    assert not o.out.exists()


# --- run folders for report and compare ----------------------------------------------------------
@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A real run folder (two schedulers) as bytes: summary.json, jobs.csv, timeseries.csv."""
    import subprocess
    import sys
    d = tmp_path_factory.mktemp("fuzz-run")
    (d / "s.yaml").write_bytes(SMALL)
    subprocess.run([sys.executable, "-m", "loadgen.cli.main", "run", str(d / "s.yaml"), "--schedulers", "slurm,kube",
                    "--out", str(d / "run"), "--quiet"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    return Folder({name: (d / "run" / name).read_bytes() for name in ("summary.json", "jobs.csv", "timeseries.csv")})


class Folder(dict):
    def __repr__(self) -> str:          # what a failing example prints: not the whole folder
        return f"<run folder: {', '.join(self)}>"


def _mutate_json(doc, draw):
    paths = list(_profile_paths(doc))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node = doc
        for k in path[:-1]:
            node = node[k] if isinstance(node, dict) and k in node or isinstance(node, list) and k < len(node) else None
            if not isinstance(node, (dict, list)):
                break
        if isinstance(node, (dict, list)) and (path[-1] in node if isinstance(node, dict) else path[-1] < len(node)):
            node[path[-1]] = draw(st.one_of(HOSTILE, NAME))
    return doc


@pytest.mark.slow
@FUZZ
@given(st.data(), st.sampled_from(["summary", "jobs", "timeseries", "ceiling"]), st.sampled_from(["report", "compare"]))
def test_generated_run_folders_end_in_one_line_or_a_page(run_folder, data, part, command):
    files = {f"d/{k}": v for k, v in run_folder.items()}
    if part == "summary":
        doc = _mutate_json(json.loads(run_folder["summary.json"]), data.draw)
        files["d/summary.json"] = json.dumps(doc, allow_nan=True).encode()
    elif part == "ceiling":
        files = {"d/ceiling.json": json.dumps(_mutate_json({
            "scenario": "x", "slo": {"admission_p99_s": 60}, "nodes": 16, "jobs_per_point": 20, "complete": True,
            "points": {"kube": [{"churn_multiplier": 1.0, "p99_s": 2.0, "met": True, "load": {"a": 0.5}}]},
            "ceiling": {"kube": {"ceiling_churn_multiplier": 1.0, "broke_at_churn_multiplier": None, "cap": None,
                                 "points_run": 1, "jobs_per_s": 1.0, "pods_per_s": 1.0, "saturated": None,
                                 "evidence": None}}}, data.draw), allow_nan=True).encode()}
    else:
        name = f"{part}.csv"
        lines = run_folder[name].decode().splitlines(keepends=True)
        op = data.draw(st.sampled_from(["truncate", "garbage", "header", "cell"]))
        i = data.draw(st.integers(0, len(lines) - 1))
        if op == "truncate":
            lines = lines[:i] + [lines[i][: len(lines[i]) // 2]]
        elif op == "garbage":
            lines.insert(i, data.draw(st.binary(max_size=60)).decode("latin-1") + "\n")
        elif op == "header":
            lines[0] = data.draw(st.sampled_from(["", "\n", "scheduler\n", "a,b,c\n", '"\n', "cp_$x$,t,scheduler\n"]))
        else:
            cells = lines[i].rstrip("\n").split(",")
            # the value is drawn before the index, in the order the one-line assignment drew them
            value = str(data.draw(st.one_of(HOSTILE, NAME))).replace("\n", " ")
            cells[data.draw(st.integers(0, len(cells) - 1))] = value
            lines[i] = ",".join(cells) + "\n"
        files[f"d/{name}"] = "".join(lines).encode("utf-8", errors="surrogateescape")
    argv = ["report", "{dir}/d"] if command == "report" else ["compare", "{dir}/d", "{dir}/d", "--json"]
    o = run_cli(argv, files, codes=(0, 1, 2) if command == "compare" else (0, 2), label=f"run folders {command}",
                keep=lambda sandbox: (sandbox / "d" / "report.html").read_text()
                if (sandbox / "d" / "report.html").is_file() else None)
    if o.kept:
        assert_no_script(parse(o.kept))


def test_the_fuzz_report():
    """Runs last in this module: what the generated cases did (printed with -s; counts in the note)."""
    print(f"\nfuzz outcomes: {dict(sorted(OUTCOMES.items()))}")
