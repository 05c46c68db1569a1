#!/usr/bin/env bash
# The whole test suite: Rust (unit, integration, interop samples) and the Python peer
# tests (the original implementations and reference packages, installed in .venv).
# Usage: bash scripts/test.sh        (from the repository root; installs what it needs)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${TESSERA_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# Installs are skipped when the pinned set is already there.
stamp="$VENV/.tessera-requirements"
if ! cmp -s tests/requirements.txt "$stamp" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/requirements.txt
  # pyfolds pulls torch; its FoldWriter/FoldReader need none of it (see tests/peers/conftest.py).
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps pyfolds==1.0.2
  cp tests/requirements.txt "$stamp"
fi

echo "== cargo test"
cargo test --workspace --quiet 2>&1 | tail -n 200

echo "== cargo build (CLI for the peer tests)"
cargo build --release --quiet -p tessera-cli
export TESSERA_BIN="$PWD/target/release/tessera"

echo "== pytest (peer interop)"
set +e
"$VENV/bin/python" -m pytest -q tests/peers
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest: no peer tests collected"
  rc=0
fi
exit "$rc"
