#!/usr/bin/env bash
# The whole test suite: Rust (unit, integration, interop samples), the Python peer
# tests (the original implementations and reference packages, installed in .venv) and
# the Python package's own tests (crates/tessera-py, built into .venv with maturin).
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
# ztensor 2.1.2 (the zTensor v2 peer) is `import ztensor` like the 1.0.1 above, so it
# lives in its own directory; tests/peers/test_ztensor2.py runs it in a subprocess with
# that directory first on PYTHONPATH (numpy comes from the venv).
ZT2="$VENV/ztensor2-peer"
if [ ! -f "$ZT2/.tessera-ztensor-2.1.2" ]; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --upgrade \
    --target "$ZT2" ztensor==2.1.2
  touch "$ZT2/.tessera-ztensor-2.1.2"
fi
export TESSERA_ZTENSOR2_PATH="$(cd "$ZT2" && pwd)"

# Real servers for the remote-read tests (moto's S3 server, nginx) on free 127.0.0.1
# ports, stopped on exit; the tests fail rather than skip when they are missing.
echo "== remote test servers (moto S3, nginx)"
REMOTE_DIR="$(mktemp -d)"
trap 'bash scripts/remote-servers.sh stop "$REMOTE_DIR"; rm -rf "$REMOTE_DIR"' EXIT
eval "$(TESSERA_VENV="$VENV" bash scripts/remote-servers.sh start "$REMOTE_DIR")"
export TESSERA_REQUIRE_REMOTE=1
export TESSERA_PYTHON="$(cd "$(dirname "$VENV/bin/python")" && pwd)/python"

echo "== cargo test"
# The whole log goes to a file; the terminal gets one line per test binary (which
# binary, its result line), then, if anything failed, the failures and build errors.
LOG="${CARGO_TARGET_DIR:-$PWD/target}/test-rust.log"
mkdir -p "$(dirname "$LOG")"
set +e
cargo test --workspace --features tessera-cli/test-hooks --no-fail-fast -- --quiet >"$LOG" 2>&1
rc_rust=$?
set -e
awk '
  /^ *Running / {
    line = $0; sub(/^ *Running /, "", line)
    bin = line; sub(/^.*\(/, "", bin); sub(/\)$/, "", bin); sub(/^.*\//, "", bin)
    sub(/-[0-9a-f]+$/, "", bin); sub(/ \(.*$/, "", line)
    name = line " [" bin "]"
  }
  /^ *Doc-tests / { name = $0; sub(/^ *Doc-tests /, "doc-tests ", name) }
  /^test result:/ { printf "%-58s %s\n", name, $0; n++ }
  END { printf "%d test binaries ran\n", n }
' "$LOG"
echo "(full log: $LOG)"
if [ "$rc_rust" -ne 0 ]; then
  echo "== cargo test FAILED (exit $rc_rust): failures and errors"
  grep -n -E -A30 '^failures:$|^error(\[E[0-9]+\])?:|panicked at' "$LOG" | head -n 400
fi

echo "== cargo build (CLI for the peer tests)"
cargo build --release --quiet -p tessera-cli
export TESSERA_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/tessera"

echo "== maturin develop (the tessera Python package into $VENV)"
VIRTUAL_ENV="$(cd "$VENV" && pwd)" "$VENV/bin/maturin" develop --release --quiet \
  -m crates/tessera-py/Cargo.toml

echo "== pytest (peer interop)"
set +e
"$VENV/bin/python" -m pytest -q tests/peers
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest: no peer tests collected"
  rc=0
fi

echo "== pytest (Python package)"
set +e
"$VENV/bin/python" -m pytest -q crates/tessera-py/tests
rc_py=$?
set -e
if [ "$rc" -eq 0 ]; then
  rc=$rc_py
fi
if [ "$rc" -eq 0 ]; then
  rc=$rc_rust
fi
exit "$rc"
