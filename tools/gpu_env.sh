# Source this at the start of a command on the GPU machine (the device tool), with carry: [".whl"].
# The GPU image's numpy 2.5 breaks numba-cuda 0.30 (np.row_stack): install the pinned wheels beside it.
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl || return 1
export PYTHONPATH=$PWD/.site:$PWD
export PYTHONUNBUFFERED=1
