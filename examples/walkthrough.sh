#!/usr/bin/env bash
# A walk-through against `streamkpca demo`, with standard tools:
#   kcat (Debian package kcat), the nats CLI (or curl), jq.
# Start the demo in another terminal first; it prints its Kafka and NATS
# addresses. Then: KAFKA=127.0.0.1:PORT NATS=nats://127.0.0.1:PORT ./examples/walkthrough.sh
set -euo pipefail
KAFKA=${KAFKA:?set KAFKA to the demo Kafka address}
NATS=${NATS:?set NATS to the demo NATS URL}
HTTP=${HTTP:-http://127.0.0.1:8080}

echo "1. Produce a few points of your own into the demo's topic (one JSON vector per message):"
printf '[0.1]\n[-0.7]\n[1.3]\n' | kcat -P -b "$KAFKA" -t hermite

echo "2. A malformed message goes to the dead-letter topic, with its reason in the headers:"
printf 'not json\n' | kcat -P -b "$KAFKA" -t hermite
kcat -C -b "$KAFKA" -t hermite.dlq -o beginning -e -f 'reason=%h payload=%s\n' || true

echo "3. Watch new versions being announced (Ctrl-C to stop):"
timeout 10 nats --server "$NATS" sub 'streamkpca.hermite.updates' || true

echo "4. Project points through NATS and through HTTP:"
nats --server "$NATS" req streamkpca.hermite.project '{"vectors":[[0.5],[1.5]]}'
curl -s -X POST "$HTTP/v1/models/hermite/project" -d '{"vectors":[[0.5],[1.5]]}' | jq .

echo "5. Download the served snapshot and inspect it:"
curl -s -o /tmp/hermite.skpca "$HTTP/v1/models/hermite/snapshot"
go run ./cmd/streamkpca inspect /tmp/hermite.skpca | jq '.header | {version: .step, samples_seen, k, features: (.seeds | length)}'
