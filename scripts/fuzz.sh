#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), seeded from the interop samples
# and the test vectors. FUZZ_RUNS=N stops a target after N executions if that comes first
# (the campaign: FUZZ_RUNS=10000000 bash scripts/fuzz.sh 1800; FUZZ_TIMEOUT=S raises the
# 10 s limit per input on a loaded machine). Crashes land in
# fuzz/artifacts/<target>/; minimize one with
#   fuzz/target/<host-triple>/release/<target> -minimize_crash=1 -runs=10000 <crash-file>
# and keep it as fuzz/regressions/<target>/<name> (replayed by `cargo test`).
#
# Works without cargo-fuzz: it passes the same coverage flags cargo-fuzz would, on the
# stable toolchain, with debug assertions and overflow checks on.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
# Every target in fuzz/fuzz_targets/: one per reader of the format registry, plus detect
# and roundtrip (crates/tessera/tests/all/fuzz_regressions.rs checks the folder against the
# registry, so a new format's target is run here without editing this script).
TARGETS="${TARGETS:-$(ls fuzz/fuzz_targets | sed -n 's/\.rs$//p' | tr '\n' ' ')}"

export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps the coverage flags off build scripts and proc macros.
HOST=$(rustc -vV | sed -n 's/^host: //p')
FUZZ_TARGET="${TESSERA_FUZZ_TARGET_DIR:-fuzz/target}"
cargo build --release --quiet --manifest-path fuzz/Cargo.toml --target-dir "$FUZZ_TARGET" --target "$HOST"
BIN="$FUZZ_TARGET/$HOST/release"

seed_dir() { # target -> directory of seeds
  local t="$1" d="fuzz/corpus/$1"
  mkdir -p "$d"
  local src=(tests/interop-samples crates/tessera/tests/data)
  for s in "${src[@]}"; do
    [ -d "$s" ] || continue
    find "$s" -type f ! -name '*.md' ! -name '*.py' ! -name '*.txt' ! -name '*.golden.json' ! -name 'vectors.json' | while read -r f; do
      cp -n "$f" "$d/$(basename "$f")" 2>/dev/null || true
    done
  done
  echo "$d"
}

status=0
for t in $TARGETS; do
  corpus=$(seed_dir "$t")
  mkdir -p "fuzz/artifacts/$t"
  echo "== fuzz $t (${SECONDS_EACH}s)"
  if ! "$BIN/$t" "$corpus" -max_total_time="$SECONDS_EACH" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} -rss_limit_mb=2048 \
       -timeout="${FUZZ_TIMEOUT:-10}" -max_len=65536 -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 \
       2>"fuzz/artifacts/$t.log"; then
    echo "fuzz $t: FAILED (see fuzz/artifacts/$t.log and fuzz/artifacts/$t/)"
    tail -n 30 "fuzz/artifacts/$t.log"
    status=1
  else
    grep -E "^#[0-9]+.*(DONE|cov:)" "fuzz/artifacts/$t.log" | tail -n 1 || true
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "fuzz/artifacts/$t.log" || true
  fi
done
exit "$status"
