#!/usr/bin/env bash
# Restate (server 1.7.12, Rust SDK 0.13) on turnwise-bench's SDK-path workload, then
# turnwise's SDK path in the same window, for a ratio measured on the same machine at the same
# time. Needs npm (for the server binary, from the npm registry) and free ports 8080, 9070,
# 5122 and 9080 on 127.0.0.1. Usage: bench/restate-compare/run.sh [TURNS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
turns="${1:-3000}"
cd "$here"
server=node_modules/@restatedev/restate-server-linux-x64/bin/restate-server
[ -x "$server" ] || npm install --no-audit --no-fund --no-save @restatedev/restate-server@1.7.12
cargo build --release -q
data="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
RESTATE_BASE_DIR="$data" RESTATE_BIND_ADDRESS=127.0.0.1:5122 \
    RESTATE_INGRESS__BIND_ADDRESS=127.0.0.1:8080 RESTATE_ADMIN__BIND_ADDRESS=127.0.0.1:9070 \
    "$server" > "$data/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -sf http://127.0.0.1:9070/health > /dev/null && break
    sleep 0.2
done
echo "## Restate $("$server" --version | awk '{print $2}') + restate-sdk 0.13, c clients each on its own key"
./target/release/restate-compare --turns "$turns" --concurrency 1,16,64
kill "$pid"; wait "$pid" 2>/dev/null || true
echo
echo "## turnwise, the same workload (the SDK path), right after"
cd "$here/../.."
cargo run --release -q -p turnwise-bench -- --sdk-only --concurrency 1,16,64 --turns "$turns"
