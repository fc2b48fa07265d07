#!/usr/bin/env bash
# Checks the deployment files without a cluster, a Docker daemon or the
# network: helm lint; helm template with the default values (which must be
# refused: two replicas need PostgreSQL), with ci/full-values.yaml (every
# option) and with the other branches of the chart; the rendered objects
# through deploy/helm/validate (strict decoding into the Kubernetes API's Go
# types, the API server's checks of what the chart sets, the restricted Pod
# Security Standard, references between objects); the renders the chart must
# refuse; docker-compose.yaml through deploy/composecheck (compose-go, what
# `docker compose config` runs, and the scale-out's needs) and the compose
# CLI's `config` (Docker's plugin, else docker-compose, installed from
# Debian's packages when missing and root); and, with AGENTGATE_BIN set to a
# built agentgate, the example config in full-values.
#
# helm comes from PATH, else it is built once from its Go module into
# $AGENTGATE_TOOLS (default ~/.cache/agentgate-tools; about 2.5 minutes on
# 2 cores). kubeconform runs too when KUBECONFORM_SCHEMAS names a local copy of
# the Kubernetes JSON schemas (a -schema-location: a directory or a URL
# template); its schemas are otherwise downloaded from the internet.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

HELM_MODULE=helm.sh/helm/v4/cmd/helm
HELM_VERSION=v4.3.2
KUBECONFORM_MODULE=github.com/yannh/kubeconform/cmd/kubeconform
KUBECONFORM_VERSION=v0.8.0
tools="${AGENTGATE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/agentgate-tools}"
chart=deploy/helm/agentgate
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

log() { printf '\n== %s\n' "$*"; }

# tool NAME MODULE VERSION: NAME from PATH, else from the cache, built there
# from MODULE@VERSION the first time.
tool() {
  local name=$1 module=$2 version=$3 dir
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    return
  fi
  dir="$tools/$name-$version"
  if [ ! -x "$dir/$name" ]; then
    echo "building $name $version from $module (once, into $dir)" >&2
    local start=$SECONDS
    GOBIN="$dir" go install "$module@$version" >&2
    echo "built $name in $((SECONDS - start))s" >&2
  fi
  echo "$dir/$name"
}

helm=$(tool helm "$HELM_MODULE" "$HELM_VERSION")
log "helm: $("$helm" version --short 2>/dev/null || "$helm" version)"

log "the validator's own tests, and build it"
go -C deploy/helm/validate vet ./...
go -C deploy/helm/validate test -count=1 ./...
go -C deploy/helm/validate build -o "$out/validate" .

key1=ci-admin-key-0123456789abcdef
db=postgres://agentgate:secret@db:5432/agentgate
# Each case: a name, then helm's arguments; the chart's templates are rendered
# and validated with the -external objects of that case.
declare -A external=(
  [full]="Secret/registry-credentials,Secret/agentgate-database,Secret/agentgate-platforms-extra,Secret/model-keys,Secret/model-keys-extra"
  [replicas]=""
  [sqlite]="Secret/agentgate-keys"
  [existing]="Secret/pg,Secret/cache,Secret/chat,ConfigMap/agentgate-config,Secret/metrics-key"
)
declare -A cases=(
  [full]="-f $chart/ci/full-values.yaml"
  # The defaults plus what they lack: PostgreSQL for two replicas, and a key.
  [replicas]="--set database.url=$db --set apiKeys.keys={$key1}"
  # One gateway on SQLite with its data dir on a PersistentVolumeClaim.
  [sqlite]="--set replicaCount=1 --set persistence.enabled=true --set apiKeys.existingSecret=agentgate-keys"
  # Everything from the cluster's Secrets and ConfigMaps; keys in the config;
  # /metrics on the API port, scraped with a key.
  [existing]="--set database.existingSecret=pg --set redis.existingSecret=cache --set apiKeys.fromConfig=true
    --set platforms.existingSecret=chat --set config.existingConfigMap=agentgate-config
    --set serviceMonitor.enabled=true --set serviceMonitor.authorization.secretName=metrics-key
    --set serviceMonitor.authorization.secretKey=key --set podDisruptionBudget.minAvailable=1 --set metrics.port=0"
)

log "helm lint"
# lint renders the default values too, and only logs the chart's fail()
# messages (funcMap fail): the template step below asserts them.
"$helm" lint --strict "$chart"
for name in full replicas sqlite existing; do
  # shellcheck disable=SC2086 # the case's arguments are words
  "$helm" lint --strict --quiet "$chart" ${cases[$name]}
done

log "helm template with the default values: refused, two replicas need PostgreSQL"
if "$helm" template agentgate "$chart" >"$out/default.yaml" 2>"$out/default.err"; then
  echo "the default values rendered, but replicaCount 2 without a database must be refused"; exit 1
fi
grep -q 'several replicas need PostgreSQL' "$out/default.err" || { cat "$out/default.err"; exit 1; }
grep -v '^$' "$out/default.err"

for name in full replicas sqlite existing; do
  log "helm template ($name) and validate"
  # shellcheck disable=SC2086
  "$helm" template agentgate "$chart" --namespace agentgate ${cases[$name]} >"$out/$name.yaml"
  "$out/validate" -external "${external[$name]}" "$out/$name.yaml"
done

log "kubeconform"
if [ -n "${KUBECONFORM_SCHEMAS:-}" ]; then
  kubeconform=$(tool kubeconform "$KUBECONFORM_MODULE" "$KUBECONFORM_VERSION")
  for name in full replicas sqlite existing; do
    "$kubeconform" -strict -summary -skip ServiceMonitor -schema-location "$KUBECONFORM_SCHEMAS" "$out/$name.yaml"
  done
else
  echo "skipped: KUBECONFORM_SCHEMAS is not set (kubeconform's schemas come from the internet); deploy/helm/validate checked the objects above"
fi

# refused NAME MESSAGE ARGS...: helm template must fail, saying MESSAGE.
refused() {
  local name=$1 want=$2
  shift 2
  if "$helm" template agentgate "$chart" "$@" >/dev/null 2>"$out/refused.err"; then
    echo "$name: rendered, but must be refused with: $want"; exit 1
  fi
  if ! grep -qF -- "$want" "$out/refused.err"; then
    echo "$name: refused, but without: $want"; cat "$out/refused.err"; exit 1
  fi
  echo "refused as it should be: $name"
}
log "renders the chart refuses"
refused "several replicas on SQLite" "several replicas need PostgreSQL" --set "apiKeys.keys={$key1}"
refused "no API keys" "no API keys" --set replicaCount=1
refused "Redis without PostgreSQL" "redis is set without database" \
  --set replicaCount=1 --set "apiKeys.keys={$key1}" --set redis.url=redis://cache:6379/0
refused "keys from a config that is not there" "there is no config file" \
  --set replicaCount=1 --set apiKeys.fromConfig=true
refused "a ServiceMonitor without a key" "/metrics on the API port needs a key" \
  --set replicaCount=1 --set "apiKeys.keys={$key1}" --set serviceMonitor.enabled=true
refused "a volume for SQLite beside PostgreSQL" "persistence.enabled is for the embedded SQLite store" \
  --set "database.url=$db" --set "apiKeys.keys={$key1}" --set persistence.enabled=true
refused "a key shorter than 16 characters" "minLength" \
  --set replicaCount=1 --set "apiKeys.keys={short}"
refused "a platform variable the gateway does not read" "SLACK_TOKEN" \
  --set replicaCount=1 --set "apiKeys.keys={$key1}" --set platforms.tokens.SLACK_TOKEN=x
refused "a misspelt value" "'replicas'" --set replicaCount=1 --set "apiKeys.keys={$key1}" --set replicas=1

log "docker-compose.yaml"
# composecheck loads it with compose-go (what `docker compose config` runs:
# the Compose Specification's schema, interpolation, merge keys) and checks
# what the scale-out needs: health checks, healthy dependencies, loopback
# ports, one database and Redis, a node id per replica.
go -C deploy/composecheck vet ./...
go -C deploy/composecheck test -count=1 ./...
# The file has no default key (the tests check it refuses to start without
# one); these two load it as a user who set one.
export AGENTGATE_API_KEYS=compose-check-key-0123456789abcdef
go -C deploy/composecheck run . "$PWD/docker-compose.yaml"
# And the compose CLI's own `config`: Docker's plugin when there is one, else
# docker-compose (installed from Debian's packages when missing, as root).
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1 &&
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing docker-compose (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
if docker compose version >/dev/null 2>&1; then
  docker compose -f docker-compose.yaml config --quiet && echo "docker compose config: ok"
elif command -v docker-compose >/dev/null 2>&1; then
  docker-compose -f docker-compose.yaml config --quiet && echo "docker-compose config: ok ($(docker-compose version --short))"
else
  echo "skipped: no compose CLI, and none could be installed here"
fi

log "the example config in ci/full-values.yaml"
if [ -n "${AGENTGATE_BIN:-}" ]; then
  "$helm" template agentgate "$chart" -f "$chart/ci/full-values.yaml" --show-only templates/configmap.yaml |
    sed -n '/^  agentgate.yaml: |$/,$p' | tail -n +2 | sed 's/^    //' >"$out/agentgate.yaml"
  OPENAI_API_KEY=sk-check "$AGENTGATE_BIN" config check --offline --config "$out/agentgate.yaml"
else
  echo "skipped: AGENTGATE_BIN is not set"
fi

log "deploy checks passed"
