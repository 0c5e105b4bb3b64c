#!/usr/bin/env bash
# Test the offline install: for each Python, a fresh virtual environment, `pip install --no-index --find-links
# wheelhouse cudabook` (nothing from the internet), `pip check`, then `python -m cudabook` run outside the
# repository (so that it imports the installed wheel, not the source tree): versions, the GPU or why not, a Numba
# kernel right, NVRTC compiling for Hopper, a Jupyter kernel starting. Exits non-zero if any Python fails.
#
#   make wheelhouse && tools/test_wheelhouse.sh                  (PYTHONS="3.11" tools/test_wheelhouse.sh for one)
#   WHEELHOUSE=/path/to/wheelhouse tools/test_wheelhouse.sh      (the default is wheelhouse/ in this repository)
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WHEELHOUSE="$(cd "${WHEELHOUSE:-$ROOT/wheelhouse}" && pwd)" || { echo "no wheelhouse: run make wheelhouse"; exit 2; }
PYTHONS="${PYTHONS:-3.10 3.11 3.12}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

find_python() {   # python3.X on PATH, or pyenv's copy of it
    local v="$1" p
    for p in "$(command -v "python$v" 2>/dev/null)" "$(pyenv root 2>/dev/null)"/versions/"$v"*/bin/python; do
        if [ -x "$p" ] && "$p" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$v'.split('.')))" \
                2>/dev/null; then
            echo "$p"; return 0
        fi
    done
    return 1
}

export PIP_CONFIG_FILE=/dev/null   # only the wheelhouse, whatever index or links this machine's pip is set up with
failed=0
first=""
for v in $PYTHONS; do
    echo "=== Python $v"
    if ! py="$(find_python "$v")"; then
        echo "skipped: no Python $v on this machine"; continue
    fi
    env="$WORK/env$v"
    "$py" -m venv "$env" || { echo "FAILED: venv"; failed=1; continue; }
    if ! "$env/bin/pip" install --quiet --no-index --find-links "$WHEELHOUSE" cudabook; then
        echo "FAILED: pip install --no-index --find-links $WHEELHOUSE cudabook"; failed=1; continue
    fi
    "$env/bin/pip" check || failed=1
    (cd "$WORK" && "$env/bin/python" -m cudabook) || failed=1
    first="${first:-$py}"
done

# What the guide tells a node to run: make's editable install into a fresh .venv, from the wheels only.
if [ -n "$first" ]; then
    echo "=== make WHEELHOUSE=... (editable install of this repository, $("$first" --version))"
    if make -s -C "$ROOT" "$WORK/venv/.installed" VENV="$WORK/venv" PY="$first" WHEELHOUSE="$WHEELHOUSE"; then
        (cd "$WORK" && "$WORK/venv/bin/python" -m cudabook --quick) || failed=1
    else
        echo "FAILED: make WHEELHOUSE=$WHEELHOUSE"; failed=1
    fi
fi
exit $failed
