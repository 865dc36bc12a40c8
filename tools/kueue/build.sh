#!/usr/bin/env bash
# Build kueue-manager (tools/kueue/manager/main.go: Kueue's core and TAS controllers, the pod
# integration and Kueue's scheduler, without webhooks) against the sigs.k8s.io/kueue Go module
# pinned to one release, into the binary cache, and copy that release's CRDs next to it.
# Idempotent: exits at once when built for this release and this main.go.
#
# Kueue v0.19 requires k8s.io/kubernetes and the staging modules at Kubernetes 1.36 releases with
# no replace lines of its own, so the wrapper module only requires Kueue and carries our main.
set -euo pipefail
V=${KUEUE_VERSION:-v0.19.2}
BIN=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
CACHE=$(dirname "$BIN")
HERE=$(cd "$(dirname "$0")" && pwd)
WRAP=$CACHE/src/kueue-wrapper-$V
CRD=$CACHE/kueue-$V/crd
JOBS=${GO_BUILD_JOBS:-2}
SUM=$(cksum < "$HERE/manager/main.go" | cut -d' ' -f1)
STAMP=$BIN/.kueue-manager-$V-$SUM.built

if [[ -f $STAMP && -x $BIN/kueue-manager && -f $CRD/kueue.x-k8s.io_clusterqueues.yaml ]]; then
  exit 0
fi
command -v go >/dev/null || { echo "kueue-bins: go is not installed (need Go >= 1.26)" >&2; exit 1; }
json=$(go mod download -json "sigs.k8s.io/kueue@$V") || {
  echo "kueue-bins: the Go module proxy refused sigs.k8s.io/kueue@$V" >&2; exit 1; }
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p' <<<"$json")
mkdir -p "$BIN" "$WRAP/manager" "$CRD"
{
  echo "module gangstorm.local/kueue-build"
  echo
  echo "go $(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
  echo
  echo "require sigs.k8s.io/kueue $V"
} > "$WRAP/go.mod"
cp "$HERE/manager/main.go" "$WRAP/manager/main.go"
cp "$dir"/config/components/crd/bases/*.yaml "$CRD/"
echo "kueue-bins: building kueue-manager against sigs.k8s.io/kueue $V (go build -p $JOBS) ..."
start=$(date +%s)
(cd "$WRAP" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p "$JOBS" -trimpath \
   -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$V" -o "$BIN/kueue-manager.tmp" ./manager)
mv "$BIN/kueue-manager.tmp" "$BIN/kueue-manager"
echo "kueue-bins: built in $(( $(date +%s) - start )) s into $BIN/kueue-manager"
rm -f "$BIN"/.kueue-manager-"$V"-*.built
touch "$STAMP"
