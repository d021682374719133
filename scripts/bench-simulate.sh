#!/usr/bin/env bash
# How fast `tollgate simulate` replays a trace: LINES lines (1,000,000 by default) in each
# format, generated here (10,000 clients over an hour, a third of them with a user header),
# through the demo's rules (rules.example.yaml), on one core (taskset -c 0), best of ROUNDS.
#
#   scripts/bench-simulate.sh
#   LINES=200000 ROUNDS=1 scripts/bench-simulate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/require.sh
require bc bc

LINES=${LINES:-1000000}
ROUNDS=${ROUNDS:-3}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

echo "==> cargo build --release -p tollgate-cli"
cargo build --release -p tollgate-cli --quiet
BIN=${CARGO_TARGET_DIR:-target}/release/tollgate

echo "==> generating $LINES lines of each format in $DIR"
# Request i arrives at 3.6 ms × i (an hour for a million), from client i × 7919 mod 10,000.
awk -v n="$LINES" 'BEGIN {
  start = 1795773600
  for (i = 0; i < n; i++) {
    t = start + i * 3600 / n; s = int(t); ms = int((t - s) * 1000)
    c = (i * 7919) % 10000
    ip = sprintf("198.51.%d.%d", int(c / 250), c % 250)
    user = (c % 3 == 0) ? sprintf(", \"headers\": {\"x-user-id\": \"u%d\"}", c) : ""
    printf "{\"ts\": %d.%03d, \"method\": \"GET\", \"path\": \"/search?q=%d\", \"ip\": \"%s\"%s}\n", s, ms, i % 100, ip, user > "'"$DIR"'/trace.jsonl"
    printf "%s,GET,/search?q=%d,%s,%s\n", sprintf("%d.%03d", s, ms), i % 100, ip, (c % 3 == 0) ? "u" c : "" > "'"$DIR"'/body.csv"
  }
}'
{ echo "ts,method,path,ip,x-user-id"; cat "$DIR/body.csv"; } > "$DIR/trace.csv"
rm "$DIR/body.csv"
# The combined log format has whole seconds: ~278 requests share each.
awk -v n="$LINES" 'BEGIN {
  split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", month, " ")
  for (i = 0; i < n; i++) {
    s = int(i * 3600 / n); c = (i * 7919) % 10000
    printf "198.51.%d.%d - - [27/Nov/2026:%02d:%02d:%02d +0000] \"GET /search?q=%d HTTP/1.1\" 200 512 \"-\" \"bench/1.0\"\n", int(c / 250), c % 250, 10 + int(s / 3600), int(s / 60) % 60, s % 60, i % 100
  }
}' > "$DIR/trace.log"

echo
echo "| format | lines | seconds (best of $ROUNDS, one core) | lines per second |"
echo "|---|---:|---:|---:|"
for format in jsonl csv log; do
  best=""
  for _ in $(seq "$ROUNDS"); do
    started=$(date +%s.%N)
    taskset -c 0 "$BIN" simulate rules.example.yaml --trace "$DIR/trace.$format" --json > /dev/null
    ended=$(date +%s.%N)
    took=$(echo "$ended - $started" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$took < $best" | bc -l)" = 1 ]; then best=$took; fi
  done
  printf "| %s | %d | %.2f | %.0f |\n" "$format" "$LINES" "$best" "$(echo "$LINES / $best" | bc -l)"
done
