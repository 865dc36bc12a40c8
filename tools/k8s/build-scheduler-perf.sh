#!/usr/bin/env bash
# Build kube-scheduler's own benchmark, scheduler_perf (k8s.io/kubernetes KUBE_VERSION,
# test/integration/scheduler_perf/misc), as a test binary in the binary cache:
#   go test -c k8s.io/kubernetes/test/integration/scheduler_perf/misc -o $BIN_DIR/scheduler_perf.test
# through the same wrapper module as the kube binaries (tools/k8s/build-bins.sh writes it: it
# requires k8s.io/kubernetes KUBE_VERSION and pins every staging module to v0.Y.Z). No -trimpath:
# the benchmark's in-process apiserver finds files by their source path in the module cache.
# Idempotent: the binary is rebuilt only when it is missing or its embedded build info (go version
# -m) names another k8s.io/kubernetes version. About 8 minutes on 2 cores with a warm build cache.
set -euo pipefail

BIN_DIR=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
SRC_DIR=${GANGSTORM_SRC_DIR:-$(dirname "$BIN_DIR")/src}
KUBE_VERSION=${KUBE_VERSION:-v1.36.1}
GO_P=${GO_P:-2}
OUT=$BIN_DIR/scheduler_perf.test
WRAP=$SRC_DIR/k8s-wrapper-$KUBE_VERSION

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "scheduler-perf: Go toolchain not found (need go >= 1.26 on PATH)" >&2; exit 2; }
if [[ -x $OUT ]] && go version -m "$OUT" | grep -qE "^[[:space:]]*mod[[:space:]]+k8s.io/kubernetes[[:space:]]+$KUBE_VERSION[[:space:]]"; then
  echo "scheduler-perf: $OUT (k8s.io/kubernetes $KUBE_VERSION) present"
  exit 0
fi
if [[ ! -f $WRAP/go.mod ]]; then
  echo "scheduler-perf: $WRAP/go.mod missing; building the kube binaries writes it" >&2
  KUBE_VERSION=$KUBE_VERSION "$(dirname "$0")/build-bins.sh"
fi
start=$(date +%s)
echo "scheduler-perf: go test -c k8s.io/kubernetes/test/integration/scheduler_perf/misc@$KUBE_VERSION (-p $GO_P) ..."
( cd "$WRAP" && go test -c -mod=mod -p "$GO_P" -o "$OUT" k8s.io/kubernetes/test/integration/scheduler_perf/misc )
echo "scheduler-perf: built $OUT in $(( $(date +%s) - start ))s"
