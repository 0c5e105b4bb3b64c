# Source this at the start of a command on the GPU machine (the device tool), with carry: [".whl"].
# For records that name a commit, make the clean tree HERE (rm -rf .clean && git clone -q . .clean: the committed
# tree with its history, which an adopted kernel edit's BASE needs; about 30 MB with .git) and carry it too: the
# device copy's .git is not this checkout's (a `git archive` run there once archived an older commit).
# The GPU image's numpy 2.5 breaks numba-cuda 0.30 (np.row_stack): install the pinned wheels beside it.
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl || return 1
export PYTHONPATH=$PWD/.site:$PWD
export PYTHONUNBUFFERED=1
