#!/usr/bin/env bash
# The project's test command (README): installs the end-to-end tests' npm
# packages when Node is present, then runs every Go test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f tests/e2e/package.json ] && command -v npm >/dev/null; then
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi
CGO_ENABLED=0 go test -timeout 20m ./... "$@"
