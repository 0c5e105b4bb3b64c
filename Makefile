# The workbook's commands. Each creates the environment (.venv) first if it is missing.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: workbook test gpu-test gpu-notebooks bench notebooks lab wheelhouse clean

workbook: $(STAMP)            ## run every lesson headlessly; executed notebooks + results report in build/
	$(BIN)/python -m compileall -q cudabook > /dev/null
	$(BIN)/python -m cudabook.workbook

# The workbook's own modules are byte-compiled first (by `workbook` and `test`): where PYTHONDONTWRITEBYTECODE is
# set (CI's machines) no import writes a .pyc, and each of the run's processes (notebook kernels, graders'
# children) would compile them again from source (`make workbook` on 2 cores: 214 s of notebooks, 188 s with).
# test processes (pytest-xdist; each test file or notebook stays in one process): `make test WORKERS=8`. Three on
# CI's two cores: while the simulator ran its threads as Python threads they spent much of their time handing the
# interpreter lock to each other, and a third process filled the core that left idle (the whole suite in a fresh
# clone then: 574 s with 2, 433 s with 3). Its threads are greenlets now (cudabook/simwarp.py); with 3, a fresh
# clone's `bash .ci/run` took 546 s on a 2-core AMD EPYC VM (754 s before); 2 is not measured since.
# OpenBLAS runs one thread in each: its threads spin while they wait for work, and beside the other processes they
# only slow the float64 references' matrix products (a batched matmul: 3.7x slower with 2 threads on an idle
# 2-core machine, about 100x beside a busy test run).
WORKERS ?= 3
test: $(STAMP)                ## unit tests + every lesson, solution and lab through nbval (what CI runs)
	$(BIN)/python -m compileall -q cudabook tests tools > /dev/null
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile tests --nbval-lax notebooks solutions labs

gpu-test: $(STAMP)            ## only the GPU tests (marked gpu / hopper); without a GPU they skip, saying why
	$(BIN)/python -m pytest -q -rs -m "gpu or hopper" tests

# A class's check on a node with several GPUs: every lesson and lab solution, spread over all its GPUs (one at a
# time on each; PER_GPU=2 puts two on each card, as a pair sharing one would), the times in results/timings/.
PER_GPU ?= 1
gpu-notebooks: $(STAMP)       ## run and time every notebook spread over all this node's GPUs; GUIDE.md's table from it
	$(BIN)/python tools/time_lessons.py --gpus 0 --per-gpu $(PER_GPU)

bench: $(STAMP)               ## measure every track (or TRACKS="gemm") on this GPU, write results/<gpu>.json, refresh the README
	$(BIN)/python -m cudabook.results $(TRACKS) && $(BIN)/python -m cudabook.results readme

notebooks: $(STAMP)           ## rebuild notebooks/, solutions/ and labs/ from lessons/
	$(BIN)/python -m cudabook.notebooks build

# Kernels talk to JupyterLab over CurveZMQ (as `make workbook`'s do), so none warns that its traffic is plain text.
CURVE = $(shell $(BIN)/python -c "import zmq; print('auto' if zmq.has('curve') else 'disabled')" 2>/dev/null || echo disabled)
lab: $(STAMP)                 ## open JupyterLab on the workbook's map (notebooks/00_tracks.ipynb)
	$(BIN)/jupyter lab --MappingKernelManager.transport_encryption=$(CURVE) notebooks/00_tracks.ipynb

# Offline GPU nodes: `make wheelhouse` where there is internet, carry the repository with wheelhouse/ to the
# node, and there `make lab WHEELHOUSE=wheelhouse` installs from those wheels only (GUIDE.md says more).
PYTHONS ?= 3.10 3.11 3.12
wheelhouse: $(STAMP)          ## wheels of the workbook and all it needs, for CPython $(PYTHONS) on x86-64 Linux
	$(BIN)/python tools/wheelhouse.py --pythons "$(PYTHONS)" --out wheelhouse

# Online, uv (pip's faster twin, itself from PyPI) installs the packages, byte-compiled as pip leaves them (where
# PYTHONDONTWRITEBYTECODE is set, every process would compile numba and the rest from source again: CI took 12
# minutes without): about 20 s on 2 cores instead of pip's 60. Where uv cannot be had or cannot install (an index
# only pip's own configuration names, say), pip does it.
WHEELHOUSE ?=
FROM := $(if $(WHEELHOUSE),--no-index --find-links $(WHEELHOUSE),)
$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(if $(WHEELHOUSE),false,$(BIN)/python -m pip install -q uv 2> /dev/null \
	  && $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -e .) \
	  || { $(if $(WHEELHOUSE),,$(BIN)/python -m pip install -q --upgrade pip &&) \
	       $(BIN)/python -m pip install -q $(FROM) -e . ; }
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

clean:
	rm -rf build
