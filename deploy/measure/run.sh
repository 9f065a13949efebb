#!/bin/bash
# Measures the CPU and memory of registry, router and worker as separate processes
# under load, as docs/operations.md ("Resource requests") quotes them:
#
#   make build && go build -o bin/ github.com/nats-io/nats-server/v2 && N=60000 deploy/measure/run.sh
set -eu
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
bin/nats-server -a 127.0.0.1 -p "$port" -js -sd "$dir/js" > "$dir/nats.log" 2>&1 &
nats=$!
trap 'kill $nats 2>/dev/null; rm -rf "$dir"' EXIT
export SKILLBUS_NATS_URL=nats://127.0.0.1:$port
bin/registry --skills testdata/skills > "$dir/registry.log" 2>&1 &
reg=$!
until grep -q "catalog synced" "$dir/registry.log"; do sleep 0.2; done
bin/router --ensure=false > "$dir/router.log" 2>&1 &
rou=$!
bin/worker --ensure=false --concurrency 16 > "$dir/worker.log" 2>&1 &
wor=$!
until grep -q "router: running" "$dir/router.log" && grep -q "worker: running" "$dir/worker.log"; do sleep 0.2; done
go run ./deploy/measure -url "$SKILLBUS_NATS_URL" -n "${N:-20000}" -pids "registry=$reg,router=$rou,worker=$wor"
kill $wor $rou $reg
