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
echo "== remote test servers (moto S3, nginx, docker-registry)"
REMOTE_DIR="$(mktemp -d)"
trap 'bash scripts/remote-servers.sh stop "$REMOTE_DIR"; rm -rf "$REMOTE_DIR"' EXIT
eval "$(TESSERA_VENV="$VENV" bash scripts/remote-servers.sh start "$REMOTE_DIR")"
export TESSERA_REQUIRE_REMOTE=1
# The disk cache of remote reads goes to the run's temporary directory, never into the
# user's ~/.cache (tests that use the cache give it a folder of their own).
export TESSERA_CACHE_DIR="$REMOTE_DIR/cache"
export TESSERA_PYTHON="$(cd "$(dirname "$VENV/bin/python")" && pwd)/python"

echo "== cargo test"
# The whole log goes to a file; the terminal gets one line per test binary (which
# binary, its result line) and, for each crate's integration tests (one binary,
# tests/all/main.rs, a module per file), one line per module; then the total and the
# failing tests' names, and, if anything failed, the failures and build errors. Not
# --quiet: the per-module counts come from the one line per test.
LOG="${CARGO_TARGET_DIR:-$PWD/target}/test-rust.log"
mkdir -p "$(dirname "$LOG")"
set +e
cargo test --workspace --features tessera-cli/test-hooks --no-fail-fast >"$LOG" 2>&1
rc_rust=$?
set -e
awk '
  function flush_modules(   i, j, t, m) {
    # the modules of the binary just finished, sorted by name
    for (i = 2; i <= nmods; i++) {
      t = mods[i]
      for (j = i - 1; j >= 1 && mods[j] > t; j--) mods[j + 1] = mods[j]
      mods[j + 1] = t
    }
    for (i = 1; i <= nmods; i++) {
      m = mods[i]
      printf "    %-54s %d passed; %d failed; %d ignored\n", m "::", ok[m] + 0, bad[m] + 0, ign[m] + 0
      delete ok[m]; delete bad[m]; delete ign[m]; delete seen[m]
    }
    nmods = 0
  }
  /^ *Running / {
    line = $0; sub(/^ *Running /, "", line)
    bin = line; sub(/^.*\(/, "", bin); sub(/\)$/, "", bin); sub(/^.*\//, "", bin)
    sub(/-[0-9a-f]+$/, "", bin); sub(/ \(.*$/, "", line)
    # each crate has one tests/all binary: say whose (the library that cargo ran last)
    if (line ~ /^unittests src\/lib\.rs/) lib = bin
    grouped = (line ~ /tests\/all\/main\.rs$/)
    name = line " [" bin (grouped ? " of " lib : "") "]"
  }
  /^ *Doc-tests / { name = $0; sub(/^ *Doc-tests /, "doc-tests ", name); grouped = 0 }
  /^test .* \.\.\. (ok|FAILED|ignored)/ {
    t = $0; sub(/^test /, "", t); sub(/ \.\.\. .*$/, "", t)
    st = $0; sub(/^.* \.\.\. /, "", st)
    if (st ~ /^FAILED/) failed_names[++nfailed] = name ": " t
    if (grouped) {
      m = t; sub(/::.*$/, "", m)
      if (!(m in seen)) { seen[m] = 1; mods[++nmods] = m }
      if (st ~ /^ok/) ok[m]++; else if (st ~ /^FAILED/) bad[m]++; else ign[m]++
    }
  }
  /^test result:/ {
    printf "%-58s %s\n", name, $0; n++
    r = $0
    if (match(r, /[0-9]+ passed/)) tp += substr(r, RSTART, RLENGTH) + 0
    if (match(r, /[0-9]+ failed/)) tf += substr(r, RSTART, RLENGTH) + 0
    if (match(r, /[0-9]+ ignored/)) ti += substr(r, RSTART, RLENGTH) + 0
    if (grouped) flush_modules()
  }
  END {
    printf "%d test binaries ran: %d tests, %d passed, %d failed, %d ignored\n", n, tp + tf + ti, tp, tf, ti
    for (i = 1; i <= nfailed; i++) print "FAILED " failed_names[i]
  }
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
