#!/usr/bin/env bash
# The project's test command (README): installs the end-to-end tests' npm
# packages when Node is present, then runs every Go test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f tests/e2e/package.json ] && command -v npm >/dev/null; then
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
  # The SDK tests must run, not skip, once their packages are installed.
  export INFERNIX_E2E_REQUIRE_NODE=1
fi
CGO_ENABLED=0 go test -timeout 20m ./... "$@"
