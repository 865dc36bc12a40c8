"""Each class of bad input issue 12 found, as one exact case: the one line it now ends in.

tests/test_bad_input_fuzz.py generates variations of all of them; here each message is pinned."""
import pytest

from support.fuzzkit import run_cli

SMALL = (b"name: t\nduration_h: 0.1\ndrain_h: 0.05\nwarmup_h: 0\nfleet: {nodes: 16}\n"
         b"workload: {classes: {small: {share: 1, shapes: [{members: 2, gpus: 8}], duration_s: {median: 300}}}}\n")
TRACE_HEAD = b'{"gangstorm_trace": 1}\n'


def job(**over) -> bytes:
    row = {"id": 1, "members": 2, "gpus_per_member": 8, "duration_s": 60, "submit_s": 5, **over}
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in row.items()) + "}\n").encode()


def run(*extra, scenario=SMALL, files=None):
    return ["run", "{dir}/s.yaml", "--out", "{dir}/out", "--quiet", *extra], {"s.yaml": scenario, **(files or {})}


CASES = {
    # files that are not scenarios
    "binary": (run(scenario=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
               "{dir}/s.yaml: byte 0: expected UTF-8 text (is this a binary file?)"),
    "latin-1": (run(scenario=b"name: caf\xe9\n"), "{dir}/s.yaml: byte 9: expected UTF-8 text (is this a binary file?)"),
    "control-character": (run(scenario=b"name: t\x07\n"),
                          "{dir}/s.yaml: character 7: expected printable text, found 0x07 (is this a binary file?)"),
    "directory": ((["run", "{dir}", "--out", "{dir}/out"], {}), "{dir}: expected a YAML file, got a directory"),
    "empty": (run(scenario=b""), "{dir}/s.yaml: is empty; expected a scenario mapping (`{}` runs every default; "
                                 "see scenarios/)"),
    "comment-only": (run(scenario=b"# nothing yet\n"), "{dir}/s.yaml: is empty; expected a scenario mapping "
                                                       "(`{}` runs every default; see scenarios/)"),
    "mixed-key-types": (run(scenario=SMALL + b"1: x\n"),
                        "{dir}/s.yaml: line 7: expected a string key, got int 1 (quote it to mean the text)"),
    "yaml-on-key": (run(scenario=SMALL + b"on: yes\n"),
                    "{dir}/s.yaml: line 7: expected a string key, got bool True (quote it to mean the text)"),
    "duplicate-key": (run(scenario=SMALL + b"duration_h: 5\n"),
                      "{dir}/s.yaml: line 7: duplicate key 'duration_h' (first on line 2)"),
    "alias-bomb": (run(scenario=b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i > 1 else '*a'] * 10)}]\n".encode() for i in range(1, 7))),
        "{dir}/s.yaml: expected at most 200,000 values once aliases are expanded (an alias bomb?)"),
    # NaN, infinity and sizes that would never end
    "nan-drain": (run(scenario=SMALL.replace(b"drain_h: 0.05", b"drain_h: .nan")),
                  "{dir}/s.yaml: drain_h: expected a finite number, got nan"),
    "nan-image": (run(scenario=SMALL + b"startup: {image: {image_gb: .nan}}\n"),
                  "{dir}/s.yaml: startup.image.image_gb: expected a finite number, got nan"),
    "unknown-restart-policy": (run(scenario=SMALL + b"startup: {rendezvous: {restart: {kube: sometimes}}}\n"),
                               "{dir}/s.yaml: startup.rendezvous.restart.kube: expected one of in-place, requeue, "
                               "got 'sometimes'"),
    "metrics-port-on-sim": (run("--metrics-port", "9100"),
                            "--metrics-port: only with --backend real (a simulated run takes seconds: read "
                            "summary.json)"),
    "inf-evictions": (run(scenario=SMALL + b"chaos: [{kind: evictions, rate_per_h: .inf}]\n"),
                      "{dir}/s.yaml: chaos[0].rate_per_h: expected a finite number, got inf"),
    "huge-evictions": (run(scenario=SMALL + b"chaos: [{kind: evictions, rate_per_h: 1.0e+11}]\n"),
                       "{dir}/s.yaml: chaos[0].rate_per_h: expected at most 1,000,000 evictions per run, "
                       "got ~10,000,000,000"),
    "tiny-samples": (run(scenario=SMALL.replace(b"duration_h: 0.1", b"duration_h: 10") + b"sample_every_s: 0.01\n"),
                     "{dir}/s.yaml: sample_every_s: expected at most 200,000 samples per scheduler, a 10.1 h run "
                     "sampled every 0.01 s takes 3,618,000; raise sample_every_s or lower duration_h"),
    "yaml11-exponent": (run(scenario=SMALL + b"seed: 1e3\n"),
                        "{dir}/s.yaml: seed: expected an integer, got the text '1e3' (YAML reads 1e3 as text; "
                        "write 1.0e+3 or the plain number)"),
    "wide-gang": (run(scenario=SMALL.replace(b"members: 2", b"members: 17")),
                  "{dir}/s.yaml: workload.classes.small.shapes[0]: a gang of 17 x 8 GPUs never fits fleet.nodes 16 x "
                  "8 GPUs; expected gangs that fit (drop the shape or raise fleet.nodes / --nodes)"),
    "until-before-at": (run(scenario=SMALL + b"chaos: [{kind: evictions, at_s: 100, until_s: 50}]\n"),
                        "{dir}/s.yaml: chaos[0].until_s: expected >= at_s (100), got 50"),
    # traces
    "trace-nan": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": TRACE_HEAD + job(duration_s="NaN")}),
                  "{dir}/t.jsonl: line 2: expected a JSON object (NaN is not a number JSON allows)"),
    "trace-1e15-submit": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": TRACE_HEAD + job(submit_s="1e15")}),
                          "{dir}/t.jsonl: line 2: submit_s: expected a time in [0, 31536000] s (a year), got 1e+15"),
    "trace-gpus-over-node": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": TRACE_HEAD + job(gpus_per_member=16)}),
                             "{dir}/t.jsonl: job 1: gpus_per_member: expected <= fleet.gpus_per_node (8), got 16"),
    "trace-min-available": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": TRACE_HEAD + job(min_available=3)}),
                            "{dir}/t.jsonl: line 2: min_available: expected 1 to members (2), got 3"),
    "trace-wider-than-fleet": (run("--trace", "{dir}/t.jsonl", files={"t.jsonl": TRACE_HEAD + job(members=40)}),
                               "{dir}/t.jsonl: job 1: members: a gang of 40 x 8 GPUs never fits fleet.nodes 16 x 8 "
                               "GPUs; expected gangs that fit (raise --nodes)"),
    "trace-binary": ((["trace", "show", "{dir}/t.jsonl"], {"t.jsonl": b"\xff\xfe\x00garbage"}),
                     "{dir}/t.jsonl: line 1: expected UTF-8 text (is this a binary file?)"),
    "openb-nan": ((["trace", "show", "{dir}/t.csv"], {"t.csv": b"name,num_gpu,creation_time,deletion_time\n"
                                                             b"p,1,nan,5\n"}),
                  "{dir}/t.csv: line 2: expected finite num_gpu/creation_time/deletion_time"),
    # flags
    "schedulers-twice": (run("--schedulers", "kube,kube"),
                         "--schedulers: expected each scheduler once, got kube twice in 'kube,kube'"),
    "trace-with-duration": (run("--trace", "{dir}/t.jsonl", "--duration-h", "2",
                                files={"t.jsonl": TRACE_HEAD + job()}),
                            "--duration-h: not used with --trace (a replay lasts as long as its trace; set "
                            "workload.trace_limit to replay fewer jobs)"),
    "trace-with-churn": (run("--trace", "{dir}/t.jsonl", "--churn", "2", files={"t.jsonl": TRACE_HEAD + job()}),
                         "--churn: not used with a JSONL --trace (it replays its recorded submit times; export it "
                         "again with --churn)"),
    "seeds-zero": (run("--seeds", "0"),
                   "--seeds: expected a count 1 to 60 (the scenario's seed and the next ones) or a "
                                        "comma-separated list of distinct seeds (integers >= 0), got '0'"),
    "seeds-negative": (run("--seeds=-3"),
                       "--seeds: expected a count 1 to 60 (the scenario's seed and the next ones) or "
                                          "a comma-separated list of distinct seeds (integers >= 0), got '-3'"),
    "seeds-not-integer": (run("--seeds", "2,3.5"),
                          "--seeds: expected a count 1 to 60 (the scenario's seed and the next "
                                                   "ones) or a comma-separated list of distinct seeds (integers >= 0), "
                                                   "got '2,3.5'"),
    "seeds-twice": (run("--seeds", "1,3,3"), "--seeds: expected each seed once, got 3 twice in '1,3,3'"),
    "seeds-over-cap": (run("--seeds", "500"),
                       "--seeds: expected at most 60 seeds (the exact rank tests' limit), got 500"),
    "seeds-with-seed": (run("--seed", "3", "--seeds", "4"),
                        "--seeds: not used with --seed (--seeds N runs the scenario's seed and the next N-1; "
                        "--seeds a,b,c names every seed)"),
    "jobs-without-seeds": (run("--jobs", "2"), "--jobs: only with --seeds (a single seed's schedulers run one after "
                                               "another on the same plan)"),
    "jobs-zero": (run("--seeds", "3", "--jobs", "0"),
                  "--jobs: expected a positive integer (seeds run at once), got '0'"),
    "jobs-on-real-backend": (run("--seeds", "3", "--backend", "real", "--jobs", "2"),
                             "--jobs: a real backend runs one seed at a time (each seed starts its own control plane "
                             "and fleet on this machine); drop --jobs or use --backend sim"),
    "seeds-dry-run": (run("--seeds", "3", "--dry-run"),
                      "--seeds: not used with --dry-run (it describes one seed's plan; pass --seed S)"),
    "ceiling-seeds-with-seed": ((["ceiling", "{dir}/s.yaml", "--out", "{dir}/out", "--seed", "1", "--seeds", "3"],
                                 {"s.yaml": SMALL}),
                                "--seeds: not used with --seed (--seeds N runs the scenario's seed and the next N-1; "
                                "--seeds a,b,c names every seed)"),
    "ceiling-parallel-text": ((["ceiling", "{dir}/s.yaml", "--out", "{dir}/out", "--seeds", "3", "--parallel", "two"],
                               {"s.yaml": SMALL}),
                              "--parallel: expected a positive integer (seeds run at once), got 'two'"),
    "ceiling-max-multiplier-huge": ((["ceiling", "{dir}/s.yaml", "--out", "{dir}/out", "--max-multiplier", "1e9"],
                                     {"s.yaml": SMALL}),
                                    "--max-multiplier: expected <= 100000, got 1000000000.0 (ceiling.max_multiplier)"),
    "ceiling-growth-below-range": ((["ceiling", "{dir}/s.yaml", "--out", "{dir}/out", "--growth", "1.01"],
                                    {"s.yaml": SMALL}),
                                   "--growth: expected >= 1.1, got 1.01 (ceiling.growth)"),
    # output paths
    "out-is-a-file": ((["run", "{dir}/s.yaml", "--out", "{dir}/f", "--quiet"], {"s.yaml": SMALL, "f": b"x"}),
                      "--out {dir}/f: expected a new or empty directory, but it is a file"),
    "out-under-a-file": ((["run", "{dir}/s.yaml", "--out", "{dir}/f/run", "--quiet"], {"s.yaml": SMALL, "f": b"x"}),
                         "--out {dir}/f/run: expected a new or empty directory, but it is under {dir}/f, "
                         "which is a file"),
    "out-holds-a-run": ((["run", "{dir}/s.yaml", "--out", "{dir}/old", "--quiet"],
                         {"s.yaml": SMALL, "old/summary.json": b"{}\n", "old/jobs.csv": b"scheduler\n"}),
                        "--out {dir}/old: expected a new or empty directory, it already holds files (a previous "
                        "run?); choose another --out"),
    "export-to-directory": ((["trace", "export", "{dir}/s.yaml", "{dir}"], {"s.yaml": SMALL}),
                            "{dir}: expected a file to write, got a directory"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_and_exit_2(name):
    (argv, files), expected = CASES[name]
    o = run_cli(argv, files)
    sandbox = o.out.parent
    assert o.code == 2
    assert o.stderr.strip() == "gangstorm: error: " + expected.replace("{dir}", str(sandbox))


def test_a_run_folder_is_refused_but_an_empty_one_is_used():
    o = run_cli(run()[0], {"s.yaml": SMALL, "out/.keep": b""})
    assert o.code == 2
    o = run_cli(["run", "{dir}/s.yaml", "--out", "{dir}/empty", "--quiet", "--schedulers", "slurm"],
                {"s.yaml": SMALL, "empty/": b""}, out_name="empty")
    assert o.code == 0 and o.summary["complete"] is True
