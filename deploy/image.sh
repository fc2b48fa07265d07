#!/usr/bin/env bash
# Builds the agentgate image on this machine and runs it, without a Docker
# daemon or a base image from a registry: a static binary built here
# (CGO_ENABLED=0, -trimpath, -ldflags "-s -w"), packaged by Dockerfile.local
# with buildah (Debian's package, installed when missing and this runs as
# root), in Docker's image format so the HEALTHCHECK is kept. Then the image
# runs: `serve` as its user (uid 65532) on loopback, its health check
# (`agentgate health`), and one demo run through the REST API. Prints the
# build time and the binary's and the image's sizes.
#
#   bash deploy/image.sh                 # builds localhost/agentgate:dev
#   IMAGE=agentgate:v1.2.3 bash deploy/image.sh
#
# buildah keeps its images in /var/lib/containers (vfs driver: no overlay
# mounts needed); push one with `buildah push IMAGE docker-daemon:IMAGE` or
# to a registry. With Docker, deploy/README.md gives `docker build`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

image=${IMAGE:-agentgate:dev}
version=$(git describe --tags --always 2>/dev/null || echo dev)
work=$(mktemp -d)
container=""
pid=""
data=""
cleanup() {
  local rc=$?
  if [ -n "$pid" ]; then
    # buildah run does not pass signals on: stop serve itself (SIGTERM, as
    # an orchestrator does), then buildah ends with it.
    pkill -TERM -f "^/agentgate serve --data-dir $data" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if [ -n "$container" ]; then
    buildah rm "$container" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
log() { printf '\n== %s\n' "$*"; }

if ! command -v buildah >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deploy/image.sh needs buildah (Debian/Ubuntu: apt-get install buildah), or build with Docker as deploy/README.md says" >&2
    exit 1
  fi
  log "installing buildah (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah >/dev/null
fi
export STORAGE_DRIVER=vfs
bah() { buildah --storage-driver vfs "$@"; }

log "static binary $version"
start=$SECONDS
CGO_ENABLED=0 GOOS=linux GOFLAGS="${GOFLAGS:-} -buildvcs=false" go build -trimpath \
  -ldflags "-s -w -X main.version=$version" -o "$work/agentgate" ./cmd/agentgate
echo "built in $((SECONDS - start))s: $(du -h "$work/agentgate" | cut -f1) ($(stat -c %s "$work/agentgate") bytes)"
if ldd "$work/agentgate" >/dev/null 2>&1; then
  echo "the binary is dynamically linked; the image (scratch) needs a static one" >&2
  exit 1
fi

log "image $image (Dockerfile.local)"
cp Dockerfile.local "$work/"
cp /etc/ssl/certs/ca-certificates.crt "$work/"
bah build --quiet --format docker --isolation chroot -f "$work/Dockerfile.local" -t "$image" "$work" >/dev/null
bah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$image"
bah inspect --format 'user {{.Docker.Config.User}}, healthcheck {{.Docker.Config.Healthcheck.Test}}, entrypoint {{.Docker.Config.Entrypoint}} {{.Docker.Config.Cmd}}' "$image"

log "run it: serve, its health check, a demo run"
container=$(bah from --quiet "$image")
# chroot isolation shares this machine's network: serve on a free loopback
# port, read back from its "listening on" line.
# Its own data dir in the volume names the process for cleanup.
data=/data/image-check-$$
bah run --isolation chroot --env AGENTGATE_ADDR=127.0.0.1:0 "$container" -- \
  /agentgate serve --data-dir "$data" --log-level warn >"$work/serve.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 100); do
  url=$(sed -n 's/^agentgate listening on //p' "$work/serve.log")
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; echo "the image's serve did not start" >&2; exit 1; }
echo "listening on $url"
pgrep -a -f "^/agentgate serve --data-dir $data" | while read -r p args; do echo "process: uid $(stat -c %u /proc/$p) $args"; done
bah run --isolation chroot --env AGENTGATE_ADDR="${url#http://}" "$container" -- /agentgate health
out=$(curl -fsS -X POST "$url/api/v1/agents/demo/runs?wait=true" -H 'Content-Type: application/json' -d '{"input":"hello from the image"}')
grep -q '"status":"completed"' <<<"$out" || { echo "$out"; echo "the demo run did not complete" >&2; exit 1; }
echo "demo run completed"
