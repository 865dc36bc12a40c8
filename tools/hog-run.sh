#!/usr/bin/env bash
# `make test` on a fresh clone of one commit beside a one-core CPU hog (issue 31's check that the
# suite passes on a busy machine). The clone has no ../shared beside it.
#   tools/hog-run.sh [COMMIT] [DIR]      default: HEAD, a new /tmp directory; log in DIR.log
set -u
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
COMMIT=$(git -C "$REPO" rev-parse "${1:-HEAD}")
DIR=${2:-$(mktemp -d /tmp/gangstorm-hog.XXXXXX)/repo}
command -v stress-ng >/dev/null || { echo "hog-run: stress-ng is missing: apt-get install stress-ng" >&2; exit 2; }
rm -rf "$DIR"; git clone -q "$REPO" "$DIR" && git -C "$DIR" checkout -q "$COMMIT" || exit 2
setsid stress-ng --cpu 1 --cpu-method loop --timeout 4h >/dev/null 2>&1 &
hog=$!
trap 'kill -- -$hog 2>/dev/null; kill $hog 2>/dev/null' EXIT INT TERM
start=$(date +%s)
(cd "$DIR" && make test) > "$DIR.log" 2>&1
rc=$?
echo "hog-run: $COMMIT rc $rc wall $(( $(date +%s) - start )) s: $(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$DIR.log" | tr '\n' ' ')"
exit $rc
