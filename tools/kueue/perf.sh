#!/usr/bin/env bash
# Kueue's own scalability benchmark (test/performance/scheduler in the sigs.k8s.io/kueue module, the
# `make run-performance-scheduler` of that release), run here with the real Kueue: its runner
# generates the cohorts, ClusterQueues and Workloads of a generator config, marks each admitted
# Workload finished after its runtime, and records time to admission per workload class;
# minimalkueue is Kueue's core controllers and scheduler. Both are built against the pinned module
# (as tools/kueue/build.sh builds kueue-manager); envtest runs the project's kube-apiserver and etcd.
#
#   tools/kueue/perf.sh [OUT_DIR] [GENERATOR_CONFIG]    (default results/kueue/perf-baseline, the
#                                                        release's configs/baseline/generator.yaml)
#
# Everything binds to 127.0.0.1: envtest's apiserver and etcd do, and minimalkueue serves no metrics
# because no scrape interval is passed (with one, it would listen on every interface). The runner
# and all it starts run in their own session, stopped on exit, SIGINT and SIGTERM.
set -euo pipefail
V=${KUEUE_VERSION:-v0.19.2}
BIN=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
CACHE=$(dirname "$BIN")
WRAP=$CACHE/src/kueue-perf-$V
JOBS=${GO_BUILD_JOBS:-2}
OUT=${1:-results/kueue/perf-baseline}
for b in kube-apiserver etcd; do
  [[ -x $BIN/$b ]] || { echo "kueue-perf: $BIN/$b is missing: run 'make k8s-bins'" >&2; exit 1; }
done
command -v go >/dev/null || { echo "kueue-perf: go is not installed (need Go >= 1.26)" >&2; exit 1; }
json=$(go mod download -json "sigs.k8s.io/kueue@$V") || {
  echo "kueue-perf: the Go module proxy refused sigs.k8s.io/kueue@$V" >&2; exit 1; }
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p' <<<"$json")
CONFIG=${2:-$dir/test/performance/scheduler/configs/baseline/generator.yaml}
[[ -f $CONFIG ]] || { echo "kueue-perf: $CONFIG: no such generator config" >&2; exit 2; }

if [[ ! -x $WRAP/runner || ! -x $WRAP/minimalkueue ]]; then
  mkdir -p "$WRAP"
  printf 'module gangstorm.local/kueue-perf\n\ngo %s\n\nrequire sigs.k8s.io/kueue %s\n' \
    "$(sed -n 's/^go \(.*\)$/\1/p' "$gomod")" "$V" > "$WRAP/go.mod"
  echo "kueue-perf: building the runner and minimalkueue of sigs.k8s.io/kueue $V (go build -p $JOBS) ..."
  for p in runner minimalkueue; do
    (cd "$WRAP" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p "$JOBS" -o "$p.tmp" \
       "sigs.k8s.io/kueue/test/performance/scheduler/$p" && mv "$p.tmp" "$p")
  done
fi

assets=$(mktemp -d /tmp/gangstorm-kueue-perf-XXXXXX)
mkdir -p "$OUT"
ln -s "$BIN/kube-apiserver" "$BIN/etcd" "$assets/"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
before=$(cut -d' ' -f1-3 /proc/loadavg)
# the runner finds the project's files through PROJECT_DIR (test/util: filepath.Dir of it)
PROJECT_DIR=$dir/Makefile KUBEBUILDER_ASSETS=$assets setsid "$WRAP/runner" --o "$OUT" \
  --crds="$dir/config/components/crd/bases" --generatorConfig="$CONFIG" --minimalKueue="$WRAP/minimalkueue" \
  --withLogs=true --logToFile=true > "$OUT/runner.log" 2>&1 &
pid=$!
stop() {
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -rf "$assets"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rc=0
wait "$pid" || rc=$?
after=$(cut -d' ' -f1-3 /proc/loadavg)
printf '{"command": "%s", "kueue": "%s", "config": "%s", "started": "%s", "load_avg": {"before": [%s], "after": [%s]}, "exit": %d}\n' \
  "tools/kueue/perf.sh $*" "$V" "${CONFIG#"$dir"/}" "$started" "${before// /, }" "${after// /, }" "$rc" > "$OUT/run.json"
rm -f "$OUT/kubeconfig"
[[ $rc == 0 ]] || { echo "kueue-perf: the runner exited $rc: $OUT/runner.log" >&2; exit 1; }
echo "kueue-perf: $OUT/summary.yaml (time to admission per workload class), $OUT/minimalkueue.stats.yaml"
