#!/bin/bash
# Every 30 s while the soak runs: the all-class rolling-p99 recording rule and ALERTS (firing and
# pending), raw answers of the soak's Prometheus, one line each into $3.
# usage: poll.sh PROMETHEUS_URL SOAK_PID OUT
P=$1; PID=$2; OUT=$3
while kill -0 "$PID" 2>/dev/null; do
  ts=$(date -u +%H:%M:%S)
  r=$(curl -s -m 10 --noproxy '*' "$P/api/v1/query" --data-urlencode 'query=scheduler:gangstorm_admission_seconds:p99_rate5m')
  a=$(curl -s -m 10 --noproxy '*' "$P/api/v1/query" --data-urlencode 'query=ALERTS')
  echo "$ts rule $r" >> "$OUT"
  echo "$ts alerts $a" >> "$OUT"
  sleep 30
done
