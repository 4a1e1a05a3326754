#!/usr/bin/env bash
# Builds the streamkpca container image without a container daemon, with
# go-containerregistry's crane: a static binary (CGO off), the system's CA
# certificates (TLS to Kafka, NATS and a Schema Registry with the system
# roots), user 65532 (nonroot), the entrypoint and command of
# deploy/Dockerfile. The image is written as an OCI tarball
# (docker load -i, podman load -i, or crane push it to a registry), then
# checked: its config, and the binary taken back out of the image runs.
#
#   bash deploy/image.sh [OUT.tar]     (default: streamkpca-image.tar)
#
# Needs Go and network access to the Go module proxy (crane is built from
# it); no daemon, no base image pulled (the base is empty).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-streamkpca-image.tar}
crane_version=v0.22.1
work=$(mktemp -d)
reg_pid=
cleanup() {
  [ -n "$reg_pid" ] && kill "$reg_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

GOBIN="$work/bin" go install "github.com/google/go-containerregistry/cmd/crane@$crane_version"
crane="$work/bin/crane"

# The layer: /streamkpca, /etc/ssl/certs/ca-certificates.crt, an empty
# /tmp (owned by nonroot) and the example settings at the command's path.
root="$work/root"
mkdir -p "$root/etc/ssl/certs" "$root/etc/streamkpca" "$root/tmp"
chmod 1777 "$root/tmp"
CGO_ENABLED=0 go build -trimpath -o "$root/streamkpca" ./cmd/streamkpca
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || { echo "image.sh: $certs not found (Debian: apt-get install ca-certificates)" >&2; exit 1; }
cp "$certs" "$root/etc/ssl/certs/"
cp configs/streamkpca.yaml "$root/etc/streamkpca/streamkpca.yaml"
tar --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -C "$root" -cf "$work/layer.tar" .

# crane mutates images in a registry: an in-memory one on loopback, for
# the build's life.
"$crane" registry serve --address 127.0.0.1:0 > "$work/registry.log" 2>&1 &
reg_pid=$!
addr=
for _ in $(seq 100); do
  port=$(grep -o 'serving on port [0-9]*' "$work/registry.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && addr=127.0.0.1:$port
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { echo "image.sh: the local registry did not start:" >&2; cat "$work/registry.log" >&2; exit 1; }
ref="$addr/streamkpca:build"
"$crane" append --insecure --oci-empty-base --platform linux/amd64 -f "$work/layer.tar" -t "$ref" > /dev/null 2>&1
"$crane" mutate --insecure "$ref" -t "$ref" \
  --entrypoint /streamkpca --cmd run,--config,/etc/streamkpca/streamkpca.yaml \
  --user 65532:65532 --exposed-ports 8080/tcp --workdir /tmp --set-platform linux/amd64 > /dev/null 2>&1
"$crane" pull --insecure "$ref" "$out" 2> /dev/null

# Checks: the config says what the Dockerfile says, and the binary in the
# image's filesystem runs.
cfg=$("$crane" config --insecure "$ref")
for want in '"Entrypoint":["/streamkpca"]' '"User":"65532:65532"' '"8080/tcp"'; do
  grep -qF "$want" <<<"$cfg" || { echo "image.sh: the image config lacks $want: $cfg" >&2; exit 1; }
done
mkdir -p "$work/check"
"$crane" export --insecure "$ref" - | tar -x -C "$work/check" streamkpca etc/ssl/certs/ca-certificates.crt
"$work/check/streamkpca" version
echo "image.sh: wrote $out ($(du -h "$out" | cut -f1)), $("$crane" digest --insecure "$ref")"
