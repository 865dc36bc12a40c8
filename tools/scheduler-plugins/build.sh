#!/usr/bin/env bash
# Build scheduler-plugins (sigs.k8s.io/scheduler-plugins) from its Go module pinned to one release into
# the binary cache: its kube-scheduler with the out-of-tree plugins (Coscheduling among them) as
# sp-scheduler, and its controller (PodGroup and ElasticQuota status) as sp-controller; copy the
# release's CRDs next to them. Idempotent: a binary already built for this release is kept, and the
# script exits at once when everything is there.
#
# A release requires k8s.io/kubernetes at the Kubernetes release it was built against and replaces
# every staging module (v0.0.0 upstream) by that release's; replace lines of a dependency are ignored
# by Go, so a small wrapper module repeats them. SP_KUBE_VERSION (default: the release's own, read
# from its go.mod) rebuilds the same plugins against another Kubernetes release instead: every
# k8s.io replace line then points at that release (docs/kube-gang.md records what that gives).
set -euo pipefail
V=${SCHEDULER_PLUGINS_VERSION:-v0.34.7}
BIN=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
CACHE=$(dirname "$BIN")
CRD=$CACHE/scheduler-plugins-$V/crd
JOBS=${GO_BUILD_JOBS:-2}
CRDS="scheduling.x-k8s.io_podgroups.yaml scheduling.x-k8s.io_elasticquotas.yaml"
# binary name in the cache -> the release's command
declare -A CMDS=([sp-scheduler]=cmd/scheduler [sp-controller]=cmd/controller)

command -v go >/dev/null || { echo "scheduler-plugins: go is not installed (need Go >= 1.24)" >&2; exit 1; }
json=$(go mod download -json "sigs.k8s.io/scheduler-plugins@$V") || {
  echo "scheduler-plugins: the Go module proxy refused sigs.k8s.io/scheduler-plugins@$V" >&2; exit 1; }
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p' <<<"$json")
own_kube=$(sed -n 's#^[[:space:]]*k8s.io/kubernetes => k8s.io/kubernetes \(v[0-9.]*\)$#\1#p' "$gomod")
KUBE=${SP_KUBE_VERSION:-$own_kube}
TAG=$V-k8s-$KUBE
WRAP=$CACHE/src/scheduler-plugins-wrapper-$TAG

todo=()
for out in "${!CMDS[@]}"; do
  [[ -f $BIN/.$out-$TAG.built && -x $BIN/$out ]] || todo+=("$out")
done
mkdir -p "$BIN" "$WRAP" "$CRD"
for f in $CRDS; do cp "$dir/config/crd/bases/$f" "$CRD/"; done
if [[ ${#todo[@]} -eq 0 ]]; then
  exit 0
fi
staging="v0.${KUBE#v1.}"
{
  echo "module gangstorm.local/scheduler-plugins-build"
  echo
  echo "go $(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
  echo
  echo "require sigs.k8s.io/scheduler-plugins $V"
  echo
  # The release's replace lines (block and single-line form); k8s.io ones move to $KUBE when asked.
  awk '/^replace \(/{inblk=1; next} inblk && /^\)/{inblk=0; next}
       inblk && /=>/ {print "replace " $0; next} /^replace [^(]/{print}' "$gomod" \
    | sed 's/^replace[[:space:]]*/replace /' \
    | if [[ $KUBE == "$own_kube" ]]; then cat; else
        sed -E "s#^replace (k8s\.io/kubernetes) => k8s\.io/kubernetes v[0-9.]+#replace \1 => k8s.io/kubernetes $KUBE#;
                s#^replace (k8s\.io/[a-z0-9-]+) => (k8s\.io/[a-z0-9-]+) v0\.[0-9.]+\$#replace \1 => \2 $staging#"; fi
} > "$WRAP/go.mod"
cat > "$WRAP/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "sigs.k8s.io/scheduler-plugins/cmd/controller"
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
GO
minor=$(echo "$KUBE" | cut -d. -f2)
vflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  vflags="$vflags -X $pkg.gitVersion=$KUBE-scheduler-plugins-$V -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
for out in "${todo[@]}"; do
  echo "scheduler-plugins: building $out from sigs.k8s.io/scheduler-plugins $V ${CMDS[$out]} against Kubernetes $KUBE (go build -p $JOBS) ..."
  start=$(date +%s)
  (cd "$WRAP" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p "$JOBS" -trimpath -ldflags "-s -w$vflags" \
     -o "$BIN/$out.tmp" "sigs.k8s.io/scheduler-plugins/${CMDS[$out]}")
  mv "$BIN/$out.tmp" "$BIN/$out"
  echo "scheduler-plugins: built in $(( $(date +%s) - start )) s into $BIN/$out"
  touch "$BIN/.$out-$TAG.built"
done
