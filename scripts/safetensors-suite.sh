#!/usr/bin/env bash
# safetensors' own Python tests, run against safetensors and against tessera's drop-in.
# For development only (not run by CI; it fetches nothing).
#
# Usage: bash scripts/safetensors-suite.sh CHECKOUT
#   CHECKOUT: a checkout of github.com/huggingface/safetensors (its bindings/python/tests
#   are run; they are copied to a temporary directory, since they write files into their
#   working directory). The venv ($TESSERA_VENV, default .venv) needs the pinned
#   safetensors (tests/requirements.txt), tessera built into it (maturin develop) and,
#   for the torch tests to count, torch. TESSERA_PATH=DIR imports tessera from DIR
#   instead (another build or version of the package, for a before/after comparison).
#
# The suite runs twice: once as it is (the real safetensors), once with a package on
# PYTHONPATH that only renames: `safetensors` re-exports tessera's top-level names,
# `safetensors.numpy` is `tessera.numpy`, `safetensors.torch` is `tessera.torch`. It
# prints, for each run, passed/failed/skipped split into numpy-side and torch-side tests,
# then the tests that pass on safetensors and not on tessera. Modules whose framework is
# not installed (flax/jax, tensorflow/h5py, paddle, mlx) are not collected, or skip.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT="${1:?usage: safetensors-suite.sh CHECKOUT}"
SRC="$CHECKOUT/bindings/python/tests"
[ -d "$SRC" ] || { echo "no $SRC" >&2; exit 2; }
VENV="${TESSERA_VENV:-.venv}"
case "$VENV" in /*) ;; *) VENV="$(pwd)/$VENV" ;; esac
PY="$VENV/bin/python"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/shim/safetensors"
cat > "$WORK/shim/safetensors/__init__.py" <<'EOF'
import tessera as _t

for _n in ["SafetensorError", "TensorSpec", "__version__", "deserialize", "safe_open",
           "_safe_open_handle", "serialize", "serialize_file"]:
    if hasattr(_t, _n):  # a name tessera lacks stays missing: its tests fail to import
        globals()[_n] = getattr(_t, _n)
EOF
for m in numpy torch; do
  printf 'import sys\n\nimport tessera.%s\n\nsys.modules[__name__] = tessera.%s\n' "$m" "$m" \
    > "$WORK/shim/safetensors/$m.py"
done

# Modules whose framework is missing fail at import: leave them out, and say so.
IGNORE=()
for pair in "test_flax_comparison.py:jax" "test_tf_comparison.py:tensorflow" "test_tf_comparison.py:h5py"; do
  f="${pair%%:*}" mod="${pair##*:}"
  if ! "$PY" -c "import $mod" 2>/dev/null; then
    IGNORE+=("--ignore=tests/$f")
    echo "not collected: $f ($mod is not installed)"
  fi
done

run() {  # run NAME [PYTHONPATH]
  local dir="$WORK/$1"
  mkdir -p "$dir" && cp -r "$SRC" "$dir/tests"
  (cd "$dir" && PYTHONPATH="${2:-}" "$PY" -m pytest -q -p no:cacheprovider --continue-on-collection-errors -rA tests "${IGNORE[@]}" \
    > "$WORK/$1.log" 2>&1 || true)
  grep -E '^(PASSED|FAILED|ERROR) ' "$WORK/$1.log" | sed -E 's/ - .*//' > "$WORK/$1.txt" || true
  grep -E '^SKIPPED' "$WORK/$1.log" > "$WORK/$1.skipped" || true
}
run safetensors
run tessera "$WORK/shim${TESSERA_PATH:+:$TESSERA_PATH}"

"$PY" - "$WORK" <<'EOF'
import re, sys
work = sys.argv[1]
# torch-side: tests that make torch tensors or call safetensors.torch.
TORCH = re.compile(r"test_pt_|test_pread_backend\.py::(?!.*test_numpy_framework)|_torch\b|test_accept_path"
                   r"|overlapping_storage|WindowsTestCase|test_torch_")
def load(name):
    out = {}
    for line in open(f"{work}/{name}.txt"):
        status, test = line.split()[:2]
        out[test] = status
    return out
def side(t):
    return "torch" if TORCH.search(t) else "numpy"
def status(res, t):  # a module that failed to import has one ERROR line for all its tests
    return res.get(t) or res.get(t.split("::")[0]) or "NOT RUN"
ref, ours = load("safetensors"), load("tessera")
skipped = {n: sum(int(re.search(r"\[(\d+)\]", l).group(1)) for l in open(f"{work}/{n}.skipped"))
           for n in ("safetensors", "tessera")}
for s in ("numpy", "torch"):
    tests = [t for t in ref if "::" in t and side(t) == s]
    target = [t for t in tests if ref[t] == "PASSED"]
    print(f"safetensors  {s}-side: {len(target)} passed, {len(tests) - len(target)} failed")
    got = [t for t in target if status(ours, t) == "PASSED"]
    errors = [t for t in target if status(ours, t) == "ERROR"]
    print(f"tessera      {s}-side: {len(got)} of those {len(target)} pass"
          f" ({len(target) - len(got) - len(errors)} fail, {len(errors)} in modules that fail to import)")
print(f"skipped: safetensors {skipped['safetensors']}, tessera {skipped['tessera']}")
missing = sorted(t for t, st in ref.items() if st == "PASSED" and status(ours, t) != "PASSED")
print(f"passing on safetensors, not on tessera: {len(missing)}")
for t in missing:
    print(f"  {side(t)}: {t} ({status(ours, t)})")
EOF
