"""The scenario `make run` runs shows every budget and repeats over seeds, so its output carries
intervals and three non-zero budgets (issue 27; the evidence for its load is docs/default-scenario.md)."""
import re

from loadgen.input.scenario import load
from support.paths import ROOT

DEFAULT = ROOT / "scenarios" / "baseline-3x.yaml"


def test_make_run_runs_the_default_scenario_over_seeds():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^SCENARIO\s*\?= scenarios/baseline-3x\.yaml$", make, re.M)
    seeds = re.search(r"^SEEDS\s*\?= (\d+)$", make, re.M)
    assert seeds and int(seeds.group(1)) >= 6            # the paired test needs 6 seeds (docs/seeds.md)
    run = make[make.index("\nrun:"):].split("\n\n")[0]
    assert "$(BIN)/gangstorm run $(SCENARIO) --seeds $(SEEDS)" in run


def test_the_default_scenario_gives_all_three_budgets_in_a_small_run(tmp_path):
    from loadgen.drive.comparative import RunOptions, run
    sc = load(DEFAULT)
    image, rdv = sc.data["startup"]["image"], sc.data["startup"]["rendezvous"]
    assert image["image_gb"] > 0 and image["container_start_s"] > 0 and rdv["base_s"] > 0
    small = sc.with_overrides(**{"fleet.nodes": 500, "duration_h": 1.0, "drain_h": 1.0, "warmup_h": 0})
    out = run(small, RunOptions(schedulers=sc.data["schedulers_enabled"], out_dir=tmp_path / "run",
                                results_root=tmp_path, report=False, jobs_csv=False))
    # the schedulers a platform team chooses between for gangs (docs/default-scenario.md)
    assert list(out["schedulers"]) == ["kube-gang", "coscheduling", "kueue", "volcano", "ray", "slurm"]
    for name, s in out["schedulers"].items():
        b = s["budgets"]
        assert b["admission"]["all"]["count"] > 0, name
        assert b["placement_to_ready"]["all"]["p50"] >= image["container_start_s"], name
        assert b["placement_to_ready"]["all"]["max"] >= 720.0, name       # at least one twelve-minute cold pull
        assert b["rendezvous"]["all"]["p50"] >= rdv["base_s"], name
        assert b["time_to_training"]["all"]["count"] > 0, name
