#!/usr/bin/env bash
# Issue 35's benchmark: RANKS processes each load a quarter (by rows) of a model served by
# nginx and by s3s-fs (an S3 server on a directory), against curl + slicing, Run:ai Model
# Streamer and the link's bound. Printed, never asserted (scripts/bench_sharded.py says
# how it measures).
#   bash scripts/bench-sharded.sh [--size-mib 2048] [--tensors 200] [--ranks 4] [--reps 3]
#                                 [--only tessera,curl,runai] [--update-docs]
# Needs: .venv (scripts/test.sh makes it), curl, nginx; builds the Python package
# (opt-level 2, or release with TESSERA_BENCH_RELEASE=1; TESSERA_BENCH_NO_BUILD=1 skips
# it), s3s-fs once (scripts/remote-servers.sh, TESSERA_S3S=1). Run:ai Model
# Streamer 0.17.0 (+ its S3 backend) is installed into target/runai/pkgs without its
# dependencies and run by TESSERA_TORCH_PYTHON (a python with torch and numpy; without
# one, its rows are left out). The model (MiB-sized, kept between runs) goes to
# target/bench-sharded.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
VENV="${TESSERA_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || { echo "no $VENV: run scripts/test.sh once (it makes the venv)" >&2; exit 2; }

if [ "${TESSERA_BENCH_NO_BUILD:-0}" != 1 ]; then
  if [ "${TESSERA_BENCH_RELEASE:-0}" = 1 ]; then
    echo "== building the Python package (release)"
    export TESSERA_BENCH_BUILD="release build"
    VIRTUAL_ENV="$(cd "$VENV" && pwd)" "$VENV/bin/maturin" develop --release --quiet -m crates/tessera-py/Cargo.toml
  else
    # The dev profile with the workspace's crates at opt-level 2 too (its dependencies
    # are at 2 already, and built): minutes instead of a release build of every
    # dependency. TESSERA_BENCH_RELEASE=1 builds release.
    echo "== building the Python package (dev profile, opt-level 2)"
    export TESSERA_BENCH_BUILD="dev profile at opt-level 2 (debug assertions on)"
    CARGO_PROFILE_DEV_OPT_LEVEL=2 VIRTUAL_ENV="$(cd "$VENV" && pwd)" "$VENV/bin/maturin" develop --quiet \
      -m crates/tessera-py/Cargo.toml
  fi
fi

RUNAI="$CARGO_TARGET_DIR/runai/pkgs"
if [ -n "${TESSERA_TORCH_PYTHON:-}" ]; then
  if [ ! -d "$RUNAI/runai_model_streamer" ]; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --target "$RUNAI" \
      runai-model-streamer==0.17.0 runai-model-streamer-s3==0.17.0 humanize
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --target "$RUNAI" boto3
  fi
  export TESSERA_RUNAI_PATH="$RUNAI"
else
  echo "no TESSERA_TORCH_PYTHON (a python with torch): Run:ai Model Streamer left out" >&2
fi

DIR="$(mktemp -d)"
trap 'bash scripts/remote-servers.sh stop "$DIR"; rm -rf "$DIR"' EXIT
eval "$(TESSERA_S3S=1 TESSERA_VENV="$VENV" bash scripts/remote-servers.sh start "$DIR")"
"$VENV/bin/python" scripts/bench_sharded.py "$@"
