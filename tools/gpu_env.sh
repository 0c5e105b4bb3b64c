# Source this at the start of a command on the GPU machine (the device tool), with carry: [".whl"].
# For records that name a commit, make the clean tree HERE (rm -rf .clean && git clone -q . .clean: the committed
# tree with its history, which an adopted kernel edit's BASE needs; about 30 MB with .git) and carry it too: the
# device copy's .git is not this checkout's (a `git archive` run there once archived an older commit).
# The GPU image's numpy 2.5 breaks numba-cuda 0.30 (np.row_stack): install the pinned wheels beside it. The image
# has no greenlet either (the simulator's threads; without it the simulator children of the grader and the tests
# run Python threads, several times slower). Fetch both wheels into .whl HERE, for the GPU machine's Python 3.12:
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl numpy==2.4.6 "greenlet>=3"
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl || return 1
export PYTHONPATH=$PWD/.site:$PWD
export PYTHONUNBUFFERED=1
PYTHONPATH=$PWD/.site python3 -c "import greenlet" 2>/dev/null \
  || echo "gpu_env: greenlet is missing (the simulator's threads run as Python threads): put its wheel in .whl" >&2
