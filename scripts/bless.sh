#!/usr/bin/env bash
# Re-record the UI-test `.stderr` files and the expansion and schema snapshots, then show what
# changed. Review every change before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
TRYBUILD=overwrite cargo test -p turnwise-ui-tests --test ui
TURNWISE_BLESS=1 cargo test --workspace
git status --short -- ui-tests macros/tests examples
