"""Each class of hostile input issue 31 found, as exact cases: the one line each now ends in.

The classes: writes outside their place (devices, FIFOs, inputs, empty and over-long paths), inputs
that never end (FIFOs, devices, /dev/stdin, directories), YAML 1.1 numbers and numbers too large
to be counts, nesting too deep, names that are not plain text, zero-job runs, profiles outside the
scenario ranges, malformed kubeconfigs and slurm.conf addresses elsewhere, and run folders a report
or a comparison cannot read. tests/test_bad_input_fuzz.py generates variations of them."""
from __future__ import annotations

import json

import pytest

from support.fuzzkit import DEVICE, FIFO, LONG, Special, run_cli

SMALL = (b"name: t\nduration_h: 0.1\ndrain_h: 0.05\nwarmup_h: 0\nfleet: {nodes: 16}\n"
         b"workload: {classes: {small: {share: 1, shapes: [{members: 2, gpus: 8}], duration_s: {median: 300}}}}\n")
HEAD = b'{"gangstorm_trace": 1}\n'
SUMMARY = json.dumps({"run_id": "r", "complete": True, "schedulers": {"kube": {
    "backend": "sim", "jobs": {"submitted": 4, "admitted": 4, "never_admitted": 0},
    "admission_s": {"p50": 1.0, "p99": 2.0, "p999": 2.0, "max": 2.0, "mean": 1.0, "count": 4}}}}).encode()
NESTED = b'{"run_id": "r", "schedulers": {"kube": ' + b'[' * 5000 + b']' * 5000 + b'}}'
BIG_INT = b'{"run_id": "r", "schedulers": {"kube": {"jobs": {"admitted": ' + b'9' * 400 + b'}}}}'


def job(**over) -> bytes:
    row = {"id": 1, "members": 2, "gpus_per_member": 8, "duration_s": 60, "submit_s": 5, **over}
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in row.items()) + "}\n").encode()


def run(*extra, scenario=SMALL, files=None):
    return ["run", "{dir}/s.yaml", "--out", "{dir}/out", "--quiet", *extra], {"s.yaml": scenario, **(files or {})}


def profile(section: str, key: str, value, extra: str = "") -> bytes:
    import yaml

    from support.paths import ROOT
    doc = yaml.safe_load((ROOT / "fakes/profiles/reference.yaml").read_text())
    if key:
        doc["parameters"][section][key]["value"] = value
    else:
        for p in doc["parameters"][section].values():
            p["value"] = value
    return yaml.safe_dump(doc).encode() + extra.encode()


def kubeconfig(server="https://127.0.0.1:6443", clusters=None) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
                       "clusters": clusters if clusters is not None else [{"name": "c", "cluster": {"server": server}}],
                       "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                       "users": [{"name": "u", "user": {}}]}).encode()


OUTPUT_PATHS = {
    "export-over-a-fifo": ((["trace", "export", "{dir}/s.yaml", "{dir}/fifo"], {"s.yaml": SMALL, "fifo": FIFO}),
                           "{dir}/fifo: expected a regular file to write, got a FIFO (named pipe) (it would be "
                           "replaced); name a new file"),
    "export-over-a-device": ((["trace", "export", "{dir}/s.yaml", "{dir}/null"], {"s.yaml": SMALL, "null": DEVICE}),
                             "{dir}/null: expected a regular file to write, got a character device (it would be "
                             "replaced); name a new file"),
    "export-over-its-input": ((["trace", "export", "{dir}/s.yaml", "{dir}/s.yaml"], {"s.yaml": SMALL}),
                              "{dir}/s.yaml: expected a new file, it is this command's input {dir}/s.yaml; name "
                              "another file"),
    "export-over-its-input-by-link": ((["trace", "export", "{dir}/s.yaml", "{dir}/l.yaml"],
                                       {"s.yaml": SMALL, "l.yaml": Special("symlink", "{dir}/s.yaml")}),
                                      "{dir}/l.yaml: expected a new file, it is this command's input {dir}/s.yaml; "
                                      "name another file"),
    "report-over-summary": ((["report", "{dir}/d", "--out", "{dir}/d/summary.json"], {"d/summary.json": SUMMARY}),
                            "--out {dir}/d/summary.json: expected a new file, it is one of the files of {dir}/d; name "
                            "another file"),
    "report-over-a-fifo": ((["report", "{dir}/d"], {"d/summary.json": SUMMARY, "d/report.html": FIFO}),
                           "{dir}/d/report.html: expected a regular file to write, got a FIFO (named pipe) (it would "
                           "be replaced); name a new file"),
    "report-to-a-device": ((["report", "{dir}/d", "--out", "{dir}/null"], {"d/summary.json": SUMMARY, "null": DEVICE}),
                           "--out {dir}/null: expected a regular file to write, got a character device (it would be "
                           "replaced); name a new file"),
    "report-out-empty": ((["report", "{dir}/d", "--out", ""], {"d/summary.json": SUMMARY}),
                         "--out: expected a value, got an empty one"),
    "run-out-empty": ((["run", "{dir}/s.yaml", "--out", "", "--quiet"], {"s.yaml": SMALL}),
                      "--out: expected a value, got an empty one"),
    "trace-empty": ((["run", "{dir}/s.yaml", "--trace", "", "--quiet"], {"s.yaml": SMALL}),
                    "--trace: expected a value, got an empty one"),
    "kubeconfig-empty": ((["run", "{dir}/s.yaml", "--kubeconfig", "", "--quiet"], {"s.yaml": SMALL}),
                         "--kubeconfig: expected a value, got an empty one"),
    "scenario-empty": ((["run", "", "--quiet"], {}), "SCENARIO: expected a value, got an empty one"),
    "run-out-too-long": ((["run", "{dir}/s.yaml", "--out", "{dir}/{long}", "--quiet"], {"s.yaml": SMALL}),
                         "--out {dir}/{long}: the path is longer than the system allows (File name too long)"),
    "export-too-long": ((["trace", "export", "{dir}/s.yaml", "{dir}/{long}"], {"s.yaml": SMALL}),
                        "{dir}/{long}: the path is longer than the system allows (File name too long)"),
}

ENDLESS_INPUTS = {
    "scenario-fifo": ((["run", "{dir}/fifo", "--out", "{dir}/out"], {"fifo": FIFO}),
                      "{dir}/fifo: expected a YAML file, got a FIFO (named pipe)"),
    "scenario-device": ((["run", "{dir}/null", "--out", "{dir}/out"], {"null": DEVICE}),
                        "{dir}/null: expected a YAML file, got a character device"),
    "scenario-dev-zero": ((["run", "/dev/zero", "--out", "{dir}/out"], {}),
                          "/dev/zero: expected a YAML file, got a character device"),
    "scenario-dev-urandom": ((["trace", "export", "/dev/urandom", "{dir}/t.jsonl"], {}),
                             "/dev/urandom: expected a YAML file, got a character device"),
    "scenario-too-long": ((["run", "{dir}/{long}", "--out", "{dir}/out"], {}),
                          "{dir}/{long}: the path is longer than the system allows (File name too long)"),
    "trace-fifo": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": FIFO}),
                   "{dir}/t.jsonl: file: expected a trace file, got a FIFO (named pipe)"),
    "trace-dev-zero": ((["trace", "show", "/dev/zero"], {}), "/dev/zero: file: expected a trace file, got a "
                                                             "character device"),
    "trace-dir": ((["trace", "show", "{dir}/d"], {"d/": b""}), "{dir}/d: file: expected a trace file, got a directory"),
    "trace-too-long": ((["trace", "show", "{dir}/{long}"], {}),
                       "{dir}/{long}: file: the path is longer than the system allows (File name too long)"),
    "profile-device": (run("--profile", "{dir}/null", files={"null": DEVICE}),
                       "--profile {dir}/null: expected a profile file, got a character device"),
    "profile-fifo-show": ((["profile", "show", "{dir}/p.yaml"], {"p.yaml": FIFO}),
                          "{dir}/p.yaml: expected a profile file, got a FIFO (named pipe)"),
    "compare-fifo": ((["compare", "{dir}/a.json", "{dir}/a.json"], {"a.json": FIFO}),
                     "{dir}/a.json: expected a gangstorm summary.json, got a FIFO (named pipe)"),
    "compare-fifo-in-folder": ((["compare", "{dir}/d", "{dir}/d"], {"d/summary.json": FIFO}),
                               "{dir}/d/summary.json: expected a gangstorm summary.json, got a FIFO (named pipe)"),
    "compare-too-long": ((["compare", "{dir}/{long}", "{dir}/{long}"], {}),
                         "{dir}/{long}: the path is longer than the system allows (File name too long)"),
    "report-summary-fifo": ((["report", "{dir}/d"], {"d/summary.json": FIFO}),
                            "{dir}/d: expected a run folder holding summary.json (or a ceiling folder holding "
                            "ceiling.json), found neither"),
    "report-jobs-fifo": ((["report", "{dir}/d"], {"d/summary.json": SUMMARY, "d/jobs.csv/": b""}),
                         None),       # a folder where jobs.csv belongs: read as absent, the page says so
    "kubeconfig-fifo": (run("--kubeconfig", "{dir}/kc", files={"kc": FIFO}),
                        "--kubeconfig {dir}/kc: expected a readable file, it is a FIFO (named pipe)"),
    "slurm-conf-device": (run("--slurm-conf", "{dir}/null", files={"null": DEVICE}),
                          "--slurm-conf {dir}/null: expected a readable file, it is a character device"),
}

NUMBERS_AND_NESTING = {
    "sexagesimal-duration": (run(scenario=SMALL.replace(b"duration_h: 0.1", b"duration_h: 1:30")),
                             "{dir}/s.yaml: line 2: '1:30' is a base-60 number in YAML 1.1 (90); expected the number "
                             "itself (quote it to mean the text)"),
    "sexagesimal-float": (run(scenario=SMALL.replace(b"drain_h: 0.05", b"drain_h: 1:30.5")),
                          "{dir}/s.yaml: line 3: '1:30.5' is a base-60 number in YAML 1.1 (90.5); expected the number "
                          "itself (quote it to mean the text)"),
    "octal-seed": (run(scenario=SMALL + b"seed: 010\n"),
                   "{dir}/s.yaml: line 7: '010' is an octal number in YAML 1.1 (8); expected the number without its "
                   "leading zero (quote it to mean the text)"),
    "integer-5000-digits": (run(scenario=SMALL + b"seed: " + b"9" * 5000 + b"\n"),
                            "{dir}/s.yaml: line 7: expected an integer of at most 20 digits, got one of 5,000"),
    "leaf-size-1e12": (run(scenario=SMALL.replace(b"{nodes: 16}", b"{nodes: 16, leaf_size: 1000000000000}")),
                       "{dir}/s.yaml: fleet.leaf_size: expected <= 1000000, got 1000000000000"),
    "trace-400-digits": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": HEAD + job(members="9" * 400)}),
                         "{dir}/t.jsonl: line 2: expected a JSON object "
                         "(an integer of 400 digits; expected at most 20)"),
    "trace-deep": (run("--trace", "{dir}/t.jsonl",
                       files={"t.jsonl": HEAD + b'{"id": ' + b"[" * 3000 + b"]" * 3000 + b"}\n"}),
                   "{dir}/t.jsonl: line 2: expected a JSON object (nested deeper than 4 levels)"),
    "trace-1e400": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": HEAD + job(duration_s="1e400")}),
                    "{dir}/t.jsonl: line 2: expected a JSON object (1e400 is beyond a float's range)"),
    "compare-400-digits": ((["compare", "{dir}/a.json", "{dir}/b.json"], {"a.json": SUMMARY, "b.json": BIG_INT}),
                           "{dir}/b.json: expected a gangstorm summary.json, got invalid JSON (an integer of "
                           "400 digits; expected at most 20)"),
    "compare-deep": ((["compare", "{dir}/a.json", "{dir}/b.json"], {"a.json": SUMMARY, "b.json": NESTED}),
                     "{dir}/b.json: expected a gangstorm summary.json, "
                     "got invalid JSON (nested deeper than 64 levels)"),
    "report-deep": ((["report", "{dir}/d"], {"d/summary.json": NESTED}),
                    "{dir}/d/summary.json: not valid JSON (nested deeper than 64 levels); expected a gangstorm "
                    "summary.json (with run_id and schedulers)"),
    "report-400-digits": ((["report", "{dir}/d"], {"d/summary.json": BIG_INT}),
                          "{dir}/d/summary.json: not valid JSON (an integer of 400 digits; expected at most 20); "
                          "expected a gangstorm summary.json (with run_id and schedulers)"),
    "port-superscript-digits": (run("--metrics-port", "²³"),
                                "--metrics-port: expected a port number 0-65535, got '²³'"),
    "port-arabic-digits": (run("--dcgm-port", "١٢"), "--dcgm-port: expected a port number 0-65535, got '١٢'"),
}

NAMES = {
    "name-nul": (run(scenario=SMALL.replace(b"name: t", b'name: "a\\0b"')),
                 "{dir}/s.yaml: name: expected plain text, "
                 "got a control character (U+0000) at character 1 of 'a\\x00b'"),
    "name-newline": (run(scenario=SMALL.replace(b"name: t", b'name: "a\\nb"')),
                     "{dir}/s.yaml: name: expected plain text, got a control character (U+000A) at character 1 of "
                     "'a\\nb'"),
    "name-zero-width": (run(scenario=SMALL.replace(b"name: t", "name: a\u200bb".encode())),
                        "{dir}/s.yaml: name: expected plain text, got a format character (zero-width or text "
                        "direction) (U+200B) at character 1 of 'a\\u200bb'"),
    "name-rtl-override": (run(scenario=SMALL.replace(b"name: t", "name: a\u202eb".encode())),
                          "{dir}/s.yaml: name: expected plain text, got a format character (zero-width or text "
                          "direction) (U+202E) at character 1 of 'a\\u202eb'"),
    "class-all": (run(scenario=SMALL.replace(b"{small:", b"{all:")),
                  "{dir}/s.yaml: workload.classes.all: expected a class name other than 'all' (it stands for every job "
                  "in the per-class tables)"),
    "class-dotted": (run(scenario=SMALL.replace(b"{small:", b"{v1.0:")),
                     "{dir}/s.yaml: workload.classes.'v1.0': expected a class name without '.' (it separates the keys "
                     "of per-class tables), got 'v1.0'"),
    "trace-class-all": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": HEAD + job(cls='"all"')}),
                        "{dir}/t.jsonl: line 2: cls: expected a class name other than 'all' (it stands for "
                        "every job in the per-class tables)"),
    "trace-tenant-nul": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": HEAD + job(tenant='"a\\u0000b"')}),
                         "{dir}/t.jsonl: line 2: tenant: expected plain text, got a control character (U+0000) at "
                         "character 1 of 'a\\x00b'"),
}

ZERO_JOBS_AND_TRACES = {
    "empty-trace": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": HEAD}),
                    "{dir}/t.jsonl: file: expected at least one job to replay, found none"),
    "cpu-only-csv": (run("--trace", "{dir}/t.csv", files={"t.csv": b"name,num_gpu,creation_time,deletion_time\n"
                                                                   b"a,0,0,100\nb,0,5,60\n"}),
                     "{dir}/t.csv: file: expected at least one job to replay, found none (skipped: cpu_only 2)"),
    "upper-case-csv": (run("--trace", "{dir}/t.CSV", files={"t.CSV": b"name,num_gpu,creation_time,deletion_time\n"
                                                                     b"a,0,0,100\n"}),
                       "{dir}/t.CSV: file: expected at least one job to replay, found none (skipped: cpu_only 1)"),
    "no-schedulers": (run(scenario=SMALL + b"schedulers_enabled: []\n"),
                      "{dir}/s.yaml: schedulers_enabled: expected at least one scheduler (a run with none measures "
                      "nothing)"),
    "header-key-on-a-job": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": HEAD + job(gangstorm_trace=1)}),
                            "{dir}/t.jsonl: line 2: expected a job without the 'gangstorm_trace' key (only the first "
                            "line, the header, carries it)"),
    "header-with-job-fields": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": job(gangstorm_trace=1)}),
                               "{dir}/t.jsonl: line 1: expected either the 'gangstorm_trace' header or a job, "
                               "got a line with both (duration_s, gpus_per_member, id, members, submit_s)"),
}

PROFILES = {
    "zero-lease-period": (run("--profile", "{dir}/p.yaml",
                              files={"p.yaml": profile("control_plane", "lease_renew_s", 0)}),
                          "--profile {dir}/p.yaml: parameters.control_plane.lease_renew_s.value: "
                          "expected >= 0.1, got 0"),
    "zero-status-period": (run("--profile", "{dir}/p.yaml",
                               files={"p.yaml": profile("control_plane", "node_status_s", 0)}),
                           "--profile {dir}/p.yaml: parameters.control_plane.node_status_s.value: expected >= "
                           "0.1, got 0"),
    "zero-ray-costs": (run("--profile", "{dir}/p.yaml", files={"p.yaml": profile("ray", "", 0)}),
                       "--profile {dir}/p.yaml: parameters.ray: expected a GCS that takes some time per "
                       "placement group (one of gcs_base_ms, gcs_per_bundle_ms, gcs_per_bundle_sq_us, gcs_per_node_us, "
                       "commit_rtt_ms above 0), got 0 for all of them"),
    "zero-ray-costs-in-scenario": (run(scenario=SMALL + b"schedulers: {ray: {gcs_base_ms: 0, gcs_per_bundle_ms: 0, "
                                                        b"gcs_per_bundle_sq_us: 0, gcs_per_node_us: 0, "
                                                        b"commit_rtt_ms: 0}}\n"),
                                   "{dir}/s.yaml: schedulers.ray: expected a GCS that takes some time per "
                                   "placement group (one of gcs_base_ms, gcs_per_bundle_ms, gcs_per_bundle_sq_us, "
                                   "gcs_per_node_us, commit_rtt_ms above 0; from the scenario or its profile), got 0 "
                                   "for all of them"),
    "unknown-section": (run("--profile", "{dir}/p.yaml", files={"p.yaml": profile("kube", "observe_ms", 1).replace(
        b"parameters:\n", b"parameters:\n  borg: {}\n")}),
        "--profile {dir}/p.yaml: parameters.borg: unknown section (known: kube, volcano, kueue, ray, slurm, "
        "kube-gang, coscheduling, control_plane)"),
    "unknown-top-key": (run("--profile", "{dir}/p.yaml",
                            files={"p.yaml": profile("kube", "observe_ms", 1, "extra: 1\n")}),
                        "--profile {dir}/p.yaml: extra: "
                        "unknown key (known: name, description, parameters, validation)"),
    "validation-list": ((["profile", "show", "{dir}/p.yaml"],
                         {"p.yaml": profile("kube",
                                            "observe_ms", 1).split(b"validation:")[0]
                          + b"validation: {kube: [1, 2]}\n"}),
                        "{dir}/p.yaml: validation.kube: expected a mapping (held_out, rows, anchors, ...), got list"),
    "validation-held-out-text": ((["profile", "show", "{dir}/p.yaml"],
                                  {"p.yaml": profile("kube", "observe_ms", 1).split(
        b"validation:")[0] + b"validation: {ray: {held_out: {anchors: x, ratio: high, within_goal: true}}}\n"}),
        "{dir}/p.yaml: validation.ray.held_out.ratio: expected null or [low, high], got 'high'"),
    "validation-in-a-run": (run("--profile", "{dir}/p.yaml", files={"p.yaml": profile("kube", "observe_ms", 1).split(
        b"validation:")[0] + b"validation: {kube: {held_out: {cases: x}}}\n"}),
        "--profile {dir}/p.yaml: validation.kube.held_out.real_runs_per_case: is required"),
}

ATTACH = {
    "kubeconfig-server-number": (run("--kubeconfig", "{dir}/kc", files={"kc": kubeconfig(server=6443)}),
                                 "--kubeconfig {dir}/kc: cluster 'c': server: expected an http(s)://HOST:PORT URL, got "
                                 "int 6443"),
    "kubeconfig-server-list": (run("--kubeconfig", "{dir}/kc", files={"kc": kubeconfig(server=["https://127.0.0.1"])}),
                               "--kubeconfig {dir}/kc: cluster 'c': server: expected an http(s)://HOST:PORT URL, got "
                               "list ['https://127.0.0.1']"),
    "kubeconfig-cluster-list": (run("--kubeconfig", "{dir}/kc", files={"kc": kubeconfig(clusters=[["c"]])}),
                                "--kubeconfig {dir}/kc: clusters[0]: expected a mapping with a name, got ['c']"),
    "etcd-second-endpoint-remote": (run("--kubeconfig", "{dir}/kc", "--etcd-endpoint",
                                        "http://127.0.0.1:2379,http://10.0.0.7:2379", files={"kc": kubeconfig()}),
                                    "--etcd-endpoint: expected an address on 127.0.0.0/8, got '10.0.0.7' (pass "
                                    "--allow-remote to load a cluster on another machine)"),
    "etcd-empty-entry": (run("--kubeconfig", "{dir}/kc", "--etcd-endpoint", "http://127.0.0.1:2379,",
                             files={"kc": kubeconfig()}),
                         "--etcd-endpoint: expected http(s)://HOST:PORT URLs separated by commas, got "
                         "'http://127.0.0.1:2379,'"),
    "slurmctldaddr-remote": (run("--slurm-conf", "{dir}/slurm.conf", files={
        "slurm.conf": b"ClusterName=x\nSlurmctldHost=localhost\nSlurmctldAddr=10.1.2.3\n"}),
        "--slurm-conf {dir}/slurm.conf: SlurmctldAddr: expected an address on 127.0.0.0/8, got '10.1.2.3' (pass "
        "--allow-remote to load a cluster on another machine)"),
    "controlmachine-remote": (run("--slurm-conf", "{dir}/slurm.conf", files={
        "slurm.conf": b"ClusterName=x\nControlMachine=head01\n"}),
        "--slurm-conf {dir}/slurm.conf: ControlMachine: expected an address on 127.0.0.0/8, got 'head01' (pass "
        "--allow-remote to load a cluster on another machine)"),
    "controladdr-remote": (run("--slurm-conf", "{dir}/slurm.conf", files={
        "slurm.conf": b"ClusterName=x\nControlMachine=localhost\nControlAddr=192.168.1.1\n"}),
        "--slurm-conf {dir}/slurm.conf: ControlAddr: expected an address on 127.0.0.0/8, got '192.168.1.1' (pass "
        "--allow-remote to load a cluster on another machine)"),
    "backup-remote": (run("--slurm-conf", "{dir}/slurm.conf", files={
        "slurm.conf": b"SlurmctldHost=a(127.0.0.1)\nBackupController=b BackupAddr=10.9.9.9\n"}),
        "--slurm-conf {dir}/slurm.conf: BackupAddr: expected an address on 127.0.0.0/8, got '10.9.9.9' (pass "
        "--allow-remote to load a cluster on another machine)"),
    "include-remote": (run("--slurm-conf", "{dir}/slurm.conf", files={
        "slurm.conf": b"ClusterName=x\nSlurmctldHost=a(127.0.0.1)\nInclude more.conf\n",
        "more.conf": b"SlurmctldHost=b(10.0.0.2)\n"}),
        "--slurm-conf {dir}/more.conf: SlurmctldHost: expected an address on 127.0.0.0/8, got 'b(10.0.0.2)' (pass "
        "--allow-remote to load a cluster on another machine)"),
    "include-loop": (run("--slurm-conf", "{dir}/slurm.conf", files={
        "slurm.conf": b"SlurmctldHost=a(127.0.0.1)\nInclude slurm.conf\n"}),
        "--slurm-conf {dir}/slurm.conf: expected at most 32 Include files, nested at most 8 deep (an Include loop?)"),
}

RUN_FOLDERS = {
    "scheduler-not-a-mapping": ((["report", "{dir}/d"],
                                 {"d/summary.json": b'{"run_id": "r", "schedulers": {"kube": 3}}'}),
                                "{dir}/d/summary.json: schedulers.kube: expected a mapping, got int"),
    "by-class-a-list": ((["report", "{dir}/d"], {"d/summary.json": b'{"run_id": "r", "schedulers": {"kube": '
                                                                  b'{"by_class": [1]}}}'}),
                        "{dir}/d/summary.json: schedulers.kube.by_class: expected a mapping, got list"),
    "chaos-a-mapping": ((["report", "{dir}/d"], {"d/summary.json": b'{"run_id": "r", "schedulers": {}, "chaos": {}}'}),
                        "{dir}/d/summary.json: chaos: expected a list, got dict"),
    "jobs-csv-binary": ((["report", "{dir}/d"], {"d/summary.json": SUMMARY, "d/jobs.csv": b"\xff\xfe\x00\x81"}),
                        "{dir}/d/jobs.csv: expected UTF-8 CSV text (is this a binary file?)"),
    "jobs-csv-nul": ((["report", "{dir}/d"], {"d/summary.json": SUMMARY, "d/jobs.csv": b"scheduler,cls,admission_s\n"
                                                                                       b"kube,a\x00,1\n"}),
                     None),       # Python's csv reads a NUL; the page escapes whatever the cell holds
    "ceiling-points-not-lists": ((["report", "{dir}/d"], {"d/ceiling.json": b'{"points": {"kube": 3}, "ceiling": {}}'}),
                                 "{dir}/d/ceiling.json: points.kube: expected a list, got int"),
}

CASES = {**OUTPUT_PATHS, **ENDLESS_INPUTS, **NUMBERS_AND_NESTING, **NAMES, **ZERO_JOBS_AND_TRACES, **PROFILES,
         **ATTACH, **RUN_FOLDERS}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_is_one_line_and_exit_2(name):
    (argv, files), expected = CASES[name]
    o = run_cli(argv, files)
    sandbox = str(o.out.parent)
    if expected is None:
        assert o.code == 0, o.stderr
        return
    assert o.code == 2, o.stderr
    assert o.stderr.strip() == "gangstorm: error: " + expected.replace("{dir}", sandbox).replace("{long}", LONG)


# --- names that become paths ---------------------------------------------------------------------
@pytest.mark.parametrize("name, folder", [("../../../x", "x"), ("a/b", "a-b"), ("..", "scenario"),
                                          ("gpu tests: large", "gpu-tests-large"), ("-rf", "rf")])
def test_a_scenario_name_becomes_one_folder_inside_results(name, folder):
    scenario = SMALL.replace(b"name: t", f"name: {json.dumps(name)}".encode())

    def look(sandbox):
        return sorted(str(p.relative_to(sandbox)) for p in sandbox.rglob("*") if p.name != "s.yaml")
    o = run_cli(["run", "{dir}/s.yaml", "--schedulers", "slurm", "--quiet"], {"s.yaml": scenario}, out_name="results",
                keep=look)
    assert o.code == 0, o.stderr
    folders = [p for p in o.kept if p.count("/") == 1 and not p.endswith((".jsonl",))
               and "." not in p.split("/")[1][:1]]
    assert len(folders) == 1 and folders[0].startswith("results/") and folders[0].endswith(f"-{folder}"), o.kept
    assert f"{folders[0]}/summary.json" in o.kept and all(p.startswith("results") for p in o.kept), o.kept


def index_line(dir_: str, run_id: str = "r") -> bytes:
    return json.dumps({"run_id": run_id, "dir": dir_, "complete": True}).encode() + b"\n"


@pytest.mark.parametrize("dir_", ["/etc", "../outside", "a/../../outside", ".."])
def test_latest_never_reads_outside_the_results_folder(dir_):
    files = {"results/index.jsonl": index_line(dir_), "outside/summary.json": SUMMARY,
             "results/ok/summary.json": SUMMARY}
    o = run_cli(["compare", "latest", "latest"], files)
    assert o.code == 2 and "latest: expected a run folder, a summary.json or a name in results/index.jsonl" in o.stderr
    assert "(0 runs listed)" in o.stderr


def test_a_bom_on_the_index_keeps_its_first_entry():
    files = {"results/index.jsonl": b"\xef\xbb\xbf" + index_line("ok", "first"), "results/ok/summary.json": SUMMARY}
    o = run_cli(["compare", "first", "latest", "--json"], files)
    assert o.code == 0, o.stderr
    assert json.loads(o.stdout)["a"].endswith("results/ok/summary.json")


def test_deeply_nested_or_huge_index_lines_are_skipped_not_a_traceback():
    files = {"results/index.jsonl": b"[" * 100000 + b"\n" + b'{"dir": "ok", "complete": true, "n": ' + b"9" * 5000
             + b"}\n" + index_line("ok"), "results/ok/summary.json": SUMMARY}
    o = run_cli(["compare", "latest", "latest"], files)
    assert o.code == 0, o.stderr


def test_compare_json_never_prints_a_number_json_does_not_have(tmp_path):
    import subprocess
    import sys

    from support.paths import ROOT
    zero = json.loads(SUMMARY)
    zero["schedulers"]["kube"]["admission_s"]["p50"] = 0.0          # a change from 0: an infinite relative change
    (tmp_path / "a.json").write_text(json.dumps(zero))
    (tmp_path / "b.json").write_bytes(SUMMARY)
    r = subprocess.run([sys.executable, "-m", "loadgen.cli.main", "compare", str(tmp_path / "a.json"),
                        str(tmp_path / "b.json"), "--json", "--all"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stderr                              # a regression: p50 grew from 0

    def refuse(name):
        raise AssertionError(f"{name} in compare --json")
    rows = json.loads(r.stdout, parse_constant=refuse)["rows"]
    p50 = next(r for r in rows if r["metric"] == "admission_p50" and r["cls"] == "all")
    assert p50["a"] == 0.0 and p50["delta_pct"] is None


def test_dev_stdin_as_an_input_is_refused_not_waited_on(tmp_path):
    """A pipe that never closes on stdin: /dev/stdin as a scenario, trace or compared run is one
    line, not a wait for ever."""
    import subprocess
    import sys

    from support.paths import ROOT
    (tmp_path / "s.yaml").write_bytes(SMALL)
    for argv, expected in ((["run", "/dev/stdin"], "/dev/stdin: expected a YAML file, got a FIFO (named pipe)"),
                           (["run", str(tmp_path / "s.yaml"), "--trace", "/dev/stdin"],
                            "/dev/stdin: file: expected a trace file, got a FIFO (named pipe)"),
                           (["compare", "/dev/stdin", "/dev/stdin"],
                            "/dev/stdin: expected a gangstorm summary.json, got a FIFO (named pipe)")):
        p = subprocess.Popen([sys.executable, "-m", "loadgen.cli.main", *argv], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 2 and err.strip() == f"gangstorm: error: {expected}", (argv, err)


# --- the pytest plugin's arguments ---------------------------------------------------------------
PLUGIN_TESTS = '''
import pytest

@pytest.mark.gangstorm("{scenario}", schedulers="slurm,slurm")
def test_twice(gangstorm_summary):
    pass

@pytest.mark.gangstorm("{scenario}", nodez=4, schedulers="slurm")
def test_typo(gangstorm_summary):
    pass

@pytest.mark.gangstorm("{scenario}", nodes=2000000, schedulers="slurm")
def test_out_of_range(gangstorm_summary):
    pass

@pytest.mark.gangstorm("{scenario}", schedulers="slurm")
def test_escaping_baseline(gangstorm_summary, gangstorm_baseline):
    gangstorm_baseline(gangstorm_summary, "../../../escaped")
'''


def test_the_pytest_plugin_refuses_what_the_cli_refuses_in_the_markers_own_words(tmp_path):
    import subprocess
    import sys
    (tmp_path / "s.yaml").write_bytes(SMALL)
    (tmp_path / "test_markers.py").write_text(PLUGIN_TESTS.replace("{scenario}", str(tmp_path / "s.yaml")))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_markers.py",
                        "--gangstorm-baselines", "base/inner", "--gangstorm-save-baselines", "-rf"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = r.stdout
    assert r.returncode == 1 and "1 failed, 3 errors" in out, out     # the marker's tests fail at set-up
    assert "gangstorm: schedulers=: expected each scheduler once, got slurm twice in 'slurm,slurm'" in out
    assert "gangstorm: nodez=: unknown key (known:" in out and "(nodez)" in out
    assert "gangstorm: nodes=: expected <= 1000000, got 2000000 (fleet.nodes)" in out
    assert ("gangstorm_baseline: name '../../../escaped': expected a file name (letters, digits, '.', '_', '-'; "
            "e.g. 'escaped')") in out
    assert not (tmp_path / "escaped.json").exists() and not (tmp_path.parent / "escaped.json").exists()
    assert "Traceback" not in out and "During handling" not in out
