#!/bin/bash
# Objects on the cluster labelled by gangstorm (any run) and by this soak, of every kind the
# apiserver can list, plus every pod and namespace whatever its label.
# usage: count.sh KUBECONFIG SOAK_LABEL
KC=$1; L=$2; k="kubectl --kubeconfig $KC --request-timeout=120s"
echo "$(date -u +%H:%M:%S)  labelled gangstorm.io/run=$L, by kind (kinds with none omitted):"
found=0
for r in $($k api-resources --verbs=list -o name); do
  n=$($k get "$r" -A -l "gangstorm.io/run=$L" -o name 2>/dev/null | wc -l)
  if [ "$n" -gt 0 ]; then echo "    $r: $n"; found=1; fi
done
[ $found = 0 ] && echo "    none, in all $($k api-resources --verbs=list -o name | wc -l) listable kinds"
echo "  labelled gangstorm.io/run (any run): pods $($k get pods -A -l gangstorm.io/run -o name | wc -l), namespaces $($k get ns -l gangstorm.io/run -o name | wc -l)"
echo "  every pod on the cluster: $($k get pods -A --no-headers 2>/dev/null | wc -l); namespaces: $($k get ns --no-headers -o custom-columns=N:.metadata.name | paste -sd' ')"
