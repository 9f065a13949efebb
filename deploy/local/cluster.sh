#!/bin/bash
# A 3-node JetStream cluster on loopback and the skillbus roles as processes, without
# Docker: what `make cluster` runs. Three nats-server processes (built from the
# nats-server version in go.mod) load deploy/nats/cluster.conf — the Compose cluster's
# file — with their names, ports and directories from the environment, and the
# generated users; then the registry, a router, two workers and the repair service, each as its own
# user, every stream and bucket at R3. Ctrl-C (or `make cluster-down` from another
# terminal) stops them all.
#
# Knobs (environment): CLUSTER_DIR (.cluster: stores, logs, pids), CLUSTER_PORT
# (14222: clients on 14222-14224, routes on +2000, monitoring on +4000), SKILLS
# (testdata/skills), the *_PASSWORD variables (development ones by default).
set -uo pipefail
cd "$(dirname "$0")/../.."
dir=${CLUSTER_DIR:-.cluster}
base=${CLUSTER_PORT:-14222}
skills=${SKILLS:-testdata/skills}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

for role in registry router worker repair publisher gateway operator tool; do
  var=$(echo "$role" | tr a-z A-Z)_PASSWORD
  export "$var=${!var:-dev-$role-password}"
done

pids=()
stop() { # stop [EXIT CODE]
  trap - INT TERM
  echo
  echo "stopping: workers, router, registry, then the three nats-servers"
  # Roles first (they drain in-flight work), the servers last.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  rm -f "$dir/pids"
  echo "stopped; the JetStream stores stay in $dir (rm -rf $dir for a fresh start)"
  exit "${1:-0}"
}
trap stop INT TERM

# How to stop it from another terminal: make cluster-down, told where it is.
down="make cluster-down"
[ "${CLUSTER_DIR:-.cluster}" = .cluster ] || down="CLUSTER_DIR=$dir make cluster-down"
if [ -s "$dir/pids" ] && kill -0 $(cat "$dir/pids") 2>/dev/null; then
  echo "a cluster is already running from $dir (pids $(tr '\n' ' ' < "$dir/pids")); $down stops it" >&2
  exit 1
fi
: > "$dir/pids"

urls=()
for n in 1 2 3; do urls+=("nats://127.0.0.1:$((base + n - 1))"); done
export SKILLBUS_NATS_URL=$(IFS=,; echo "${urls[*]}")
export SKILLBUS_REPLICAS=3

for n in 1 2 3; do
  routes=()
  for o in 1 2 3; do [ "$o" = "$n" ] || routes+=("nats://127.0.0.1:$((base + 2000 + o - 1))"); done
  mkdir -p "$dir/n$n"
  NATS_NAME=n$n NATS_HOST=127.0.0.1 NATS_PORT=$((base + n - 1)) NATS_HTTP_PORT=$((base + 4000 + n - 1)) \
    NATS_CLUSTER_PORT=$((base + 2000 + n - 1)) NATS_ROUTES="[$(IFS=,; echo "${routes[*]}")]" NATS_STORE_DIR="$dir/n$n" \
    setsid bin/nats-server -c deploy/nats/cluster.conf > "$dir/n$n.log" 2>&1 &
  pids+=($!)
  echo $! >> "$dir/pids"
done
echo "nats-server n1 n2 n3 on ${urls[*]} (logs: $dir/n*.log)"
for n in 1 2 3; do
  for _ in $(seq 1 300); do
    if curl -fsS "http://127.0.0.1:$((base + 4000 + n - 1))/healthz?js-enabled-only=true" > /dev/null 2>&1; then break; fi
    kill -0 "${pids[n - 1]}" 2>/dev/null || { echo "nats-server n$n exited:" >&2; tail -20 "$dir/n$n.log" >&2; stop 1; }
    sleep 0.1
  done
done

role() { # role NAME USER ARGS...
  local name=$1 user=$2
  shift 2
  SKILLBUS_NATS_USER=$user SKILLBUS_NATS_PASSWORD=$(eval echo "\$$(echo "$user" | tr a-z A-Z)_PASSWORD") \
    setsid "$@" --log-format text > "$dir/$name.log" 2>&1 &
  pids+=($!)
  echo $! >> "$dir/pids"
}
role registry registry bin/registry --skills "$skills"
role router router bin/router --ensure=false
role worker-1 worker bin/worker --ensure=false --name w1 --repair
role worker-2 worker bin/worker --ensure=false --name w2 --repair
role repair repair bin/skillbus repair serve --ensure=false
for f in router worker-1 worker-2 repair; do
  case $f in router) want="router: running" ;; repair) want="repair service: running" ;; *) want="worker: running" ;; esac
  until grep -qs "$want" "$dir/$f.log"; do
    kill -0 $(cat "$dir/pids") 2>/dev/null || { echo "a process exited; see $dir/*.log" >&2; stop 1; }
    sleep 0.2
  done
done

cat <<EOT
registry, router, workers w1, w2 and the repair service are running (logs: $dir/registry.log, router.log, worker-*.log, repair.log)

From another terminal (the CLI connects as the operator user):

  export SKILLBUS_NATS_URL=$SKILLBUS_NATS_URL
  export SKILLBUS_NATS_USER=operator SKILLBUS_NATS_PASSWORD=$OPERATOR_PASSWORD
  bin/skillbus trigger --skill hello --data '{"name":"Ada"}' --wait
  kill \$(sed -n 2p $dir/pids)     # stop node n2; the cluster carries on with two

Ctrl-C (or $down) stops everything.
EOT
# Each process has a session of its own, so Ctrl-C reaches this script alone, which
# stops the roles before the servers they drain to.
wait || true
stop
