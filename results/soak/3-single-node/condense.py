"""poll.log (every 30 s: the all-class rolling-p99 recording rule and ALERTS, raw API answers) -> one line each."""
import json
import sys

rule = {}
for line in open(sys.argv[1]):
    ts, kind, body = line.rstrip("\n").split(" ", 2)
    try:
        d = json.loads(body)["data"]["result"]
    except (ValueError, KeyError):
        if kind == "alerts":
            print(f"{ts}  (no answer: the soak and its Prometheus had stopped)")
        continue
    if kind == "rule":
        rule[ts] = ", ".join(f'{r["metric"].get("scheduler")} {float(r["value"][1]):.3g} s' for r in d) or "-"
    else:
        firing = sorted({r["metric"]["alertname"] for r in d if r["metric"].get("alertstate") == "firing"})
        pending = sorted({r["metric"]["alertname"] for r in d if r["metric"].get("alertstate") == "pending"})
        print(f"{ts}  p99_rate5m(all classes): {rule.get(ts, '-'):<16} firing: {', '.join(firing) or 'none'}"
              + (f"; pending: {', '.join(pending)}" if pending else ""))
