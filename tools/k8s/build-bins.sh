#!/usr/bin/env bash
# Build the real Kubernetes control plane used by the "kube" real backend from Go modules
# pinned to released versions (release downloads are not reachable here; the module proxy is).
#   kwok, kwokctl                      go install sigs.k8s.io/kwok/cmd/...@KWOK_VERSION
#   kube-apiserver/-scheduler/-controller-manager
#                                      wrapper module: requires k8s.io/kubernetes KUBE_VERSION and
#                                      replaces every staging module (v0.0.0 upstream) by v0.Y.Z
#   etcd, etcdctl                      wrapper module: go.etcd.io/etcd/{server,etcdctl}/v3 ETCD_VERSION
# Idempotent: a binary whose --version already reports the pinned version is not rebuilt.
set -euo pipefail

BIN_DIR=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
SRC_DIR=${GANGSTORM_SRC_DIR:-$(dirname "$BIN_DIR")/src}
KUBE_VERSION=${KUBE_VERSION:-v1.36.1}   # kwok v0.8.0 targets Kubernetes 1.36.1
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
GO_P=${GO_P:-2}
LDSTRIP="-s -w"

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "k8s-bins: Go toolchain not found (need go >= 1.26 on PATH)" >&2; exit 2; }

mkdir -p "$BIN_DIR" "$SRC_DIR"
start=$(date +%s)
log() { printf '[k8s-bins %4ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

version_of() { if [ "$1" = etcdctl ]; then "$BIN_DIR/$1" version; else "$BIN_DIR/$1" --version; fi; }
have() {  # have BINARY VERSION_SUBSTRING: built and reporting the pinned version
  [ -x "$BIN_DIR/$1" ] && version_of "$1" 2>/dev/null | grep -q -- "$2"
}

# ---- kwok / kwokctl -------------------------------------------------------------------------
if have kwok "${KWOK_VERSION#v}" && have kwokctl "${KWOK_VERSION#v}"; then
  log "kwok, kwokctl $KWOK_VERSION: present"
else
  log "building kwok, kwokctl $KWOK_VERSION"
  GOBIN="$BIN_DIR" go install -p "$GO_P" -trimpath -ldflags "$LDSTRIP" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
fi

# ---- etcd / etcdctl -------------------------------------------------------------------------
if have etcd "${ETCD_VERSION#v}" && have etcdctl "${ETCD_VERSION#v}"; then
  log "etcd, etcdctl $ETCD_VERSION: present"
else
  log "building etcd, etcdctl $ETCD_VERSION"
  w="$SRC_DIR/etcd-wrapper-$ETCD_VERSION"
  mkdir -p "$w"
  cat > "$w/go.mod" <<GOMOD
module gangstorm.local/etcdwrapper

go 1.24

require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/etcdctl/v3 $ETCD_VERSION
)
GOMOD
  ( cd "$w" && go build -mod=mod -p "$GO_P" -trimpath -ldflags "$LDSTRIP" -o "$BIN_DIR/etcd" go.etcd.io/etcd/server/v3 \
      && go build -mod=mod -p "$GO_P" -trimpath -ldflags "$LDSTRIP" -o "$BIN_DIR/etcdctl" go.etcd.io/etcd/etcdctl/v3 )
fi

# ---- kube-apiserver / kube-scheduler / kube-controller-manager --------------------------------
kube_bins="kube-apiserver kube-scheduler kube-controller-manager"
missing=""
for b in $kube_bins; do have "$b" "Kubernetes $KUBE_VERSION" || missing="$missing $b"; done
if [ -z "$missing" ]; then
  log "$kube_bins $KUBE_VERSION: present"
else
  log "building$missing $KUBE_VERSION"
  w="$SRC_DIR/k8s-wrapper-$KUBE_VERSION"
  mkdir -p "$w"
  upstream=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  staging_v="v0.${KUBE_VERSION#v1.}"
  {
    echo "module gangstorm.local/k8swrapper"
    echo
    grep -E '^(go|godebug) ' "$upstream"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    # upstream: "	k8s.io/api => ./staging/src/k8s.io/api"  ->  "	k8s.io/api => k8s.io/api v0.Y.Z"
    sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\t\1 => \1 '"$staging_v"'#p' "$upstream"
    echo ")"
  } > "$w/go.mod"
  commit=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Hash": "\(.*\)",$/\1/p' | head -1)
  vflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    vflags="$vflags -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    vflags="$vflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    vflags="$vflags -X $pkg.gitCommit=${commit:-0000000000000000000000000000000000000000}"
  done
  pkgs=""
  for b in $missing; do pkgs="$pkgs k8s.io/kubernetes/cmd/$b"; done
  ( cd "$w" && CGO_ENABLED=0 go build -mod=mod -p "$GO_P" -trimpath -tags providerless \
      -ldflags "$LDSTRIP$vflags" -o "$BIN_DIR/" $pkgs )
fi

for b in kwok kwokctl etcd etcdctl $kube_bins; do
  printf '  %-24s %s\n' "$b" "$(version_of "$b" 2>&1 | head -1)"
done
log "done: binaries in $BIN_DIR (build time $(( $(date +%s) - start ))s)"
