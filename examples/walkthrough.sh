#!/usr/bin/env bash
# A walk-through of streamkpca with standard tools: kcat and jq (Debian
# packages kcat, jq), curl, the project's own NATS subscriber
# (examples/subscriber; the nats CLI works too if you have it) and the
# Python client (clients/python; needs numpy, Debian python3-numpy).
#
#   ./examples/walkthrough.sh            starts `streamkpca demo` itself and
#                                        takes every address from its output
#   KAFKA=host:port NATS=nats://host:port HTTP=http://host:port ./examples/walkthrough.sh
#                                        against a demo (or service) already running
#
# It stops at the first failing step and says which. CI runs it.
set -euo pipefail
trap 'echo "walkthrough: step failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
for tool in kcat jq curl go; do
  command -v "$tool" >/dev/null || { echo "walkthrough: $tool is not installed (Debian: apt-get install $tool)" >&2; exit 1; }
done

if [ -z "${KAFKA:-}" ]; then
  log=$(mktemp)
  go build -o "${TMPDIR:-/tmp}/streamkpca-walkthrough" ./cmd/streamkpca
  "${TMPDIR:-/tmp}/streamkpca-walkthrough" demo --http 127.0.0.1:0 --points 20000 --duration 5m >"$log" 2>&1 &
  demo=$!
  trap 'kill $demo 2>/dev/null; wait $demo 2>/dev/null; rm -f "$log"' EXIT
  for _ in $(seq 1 300); do
    grep -q '^  HTTP' "$log" && break
    kill -0 $demo 2>/dev/null || { echo "walkthrough: the demo exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.2
  done
  KAFKA=$(awk '/Kafka \(embedded\)/ {print $3}' "$log")
  NATS=$(awk '/NATS  \(embedded\)/ {print $3}' "$log")
  HTTP=$(awk '/^  HTTP/ {print $2}' "$log")
  [ -n "$KAFKA" ] && [ -n "$NATS" ] && [ -n "$HTTP" ] || { echo "walkthrough: no addresses in the demo's output:" >&2; cat "$log" >&2; exit 1; }
fi
: "${NATS:?set NATS too}" "${HTTP:?set HTTP too}"
echo "Kafka $KAFKA, NATS $NATS, HTTP $HTTP"

echo "1. Produce a few points of your own into the demo's topic (one JSON vector per message):"
printf '[0.1]\n[-0.7]\n[1.3]\n' | kcat -P -b "$KAFKA" -t hermite

echo "2. A malformed message goes to the dead-letter topic, with its reason in a header:"
printf 'not json\n' | kcat -P -b "$KAFKA" -t hermite
reason=""
for _ in $(seq 1 100); do
  reason=$(kcat -C -b "$KAFKA" -t hermite.dlq -o beginning -e -J -q 2>/dev/null |
    jq -r 'select(.payload == "not json") | .headers as $h | [range(0; $h | length; 2) | select($h[.] == "reason") | $h[. + 1]] | first // empty' | head -1) || true # the topic appears with the first dead letter
  [ -n "$reason" ] && break
  sleep 0.2
done
[ "$reason" = malformed ] || { echo "walkthrough: the bad message is not on hermite.dlq with reason malformed (got '$reason')" >&2; exit 1; }
echo "   dead-lettered with reason: $reason"

echo "3. Wait for a served model, then project points through HTTP:"
for _ in $(seq 1 300); do
  curl -sf "$HTTP/readyz" >/dev/null && break
  sleep 0.2
done
curl -sf -X POST "$HTTP/v1/models/hermite/project" -d '{"vectors":[[0.5],[1.5]]}' | jq -c .

echo "3b. Every message's scores on hermite.scores (output.topic): its projection, residual and novelty, by the version served:"
rec=""
for _ in $(seq 1 100); do
  rec=$(kcat -C -b "$KAFKA" -t hermite.scores -o -1 -e -q 2>/dev/null | jq -c 'select(.model != null)' | head -1) || true
  [ -n "$rec" ] && break
  sleep 0.2
done
echo "$rec" | jq -e '.projection | length == 3' >/dev/null && echo "$rec" | jq -e '.residual >= 0 and .novelty >= 0' >/dev/null ||
  { echo "walkthrough: no scored record on hermite.scores (got '$rec')" >&2; exit 1; }
echo "   $rec"
echo "   and the same numbers from the service for any vector, with its version:"
curl -sf -X POST "$HTTP/v1/models/hermite/score" -d '{"vectors":[[0.5],[9]]}' | jq -c '{version, residuals, novelty}'

echo "4. Follow the model over NATS and project locally with its current version (then exit):"
go run ./examples/subscriber --nats "$NATS" --model hermite --points '[[0.5],[1.5]]' --versions 1

echo "5. The stored versions, then download the served snapshot and inspect it:"
curl -sf "$HTTP/v1/models/hermite/versions" | jq -c '[.versions[] | {version, samples_seen, sha256: .sha256[0:12]}]'
snap=$(mktemp --suffix=.skpca)
curl -sf -o "$snap" "$HTTP/v1/models/hermite/snapshot"
go run ./cmd/streamkpca inspect "$snap" | jq -c '{version: .header.step, samples_seen: .header.samples_seen, k: .header.k, features}'
rm -f "$snap"

echo "6. Python (numpy): fetch the served model, project locally, and check the service's projections are the same bits:"
py=""
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$cand" ] && "$cand" -c 'import numpy' 2>/dev/null && { py=$cand; break; }
done
if [ -z "$py" ]; then
  if [ -n "${CI:-}" ]; then echo "walkthrough: no Python 3 with numpy (Debian: apt-get install python3-numpy)" >&2; exit 1; fi
  echo "   no Python 3 with numpy here (Debian: apt-get install python3-numpy); step 6 not run"
else
  "$py" clients/python/examples/project.py --url "$HTTP" --model hermite --points '[[0.5],[1.5],[-2]]' --check
fi
echo "walkthrough: every step worked"
