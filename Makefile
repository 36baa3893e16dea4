# One-command set-up: `make run` and `make test` create the virtual environment,
# install the Python dependencies, build the native (cffi) modules, then run.
PYTHON   ?= python3
VENV     ?= .venv
PY       := $(VENV)/bin/python
OPS      := $(VENV)/bin/ops
# GGML_HOME=<prefix> rebuilds the ggml bridge against another ggml build
# (headers in <prefix>/include, libraries in <prefix>/lib or lib64).
GGML_HOME ?=
STAMP    := $(VENV)/.installed
NATIVE_SRC := $(wildcard native/*.c native/*.h native/build_*.py native/aclnn/*.c native/aclnn/*.h native/aclnn/api/*.def)
NATIVE_STAMP := native/.built

.PHONY: all setup native run test bench check-install ggml-cpu ggml-cpu-export ggml-cpu-check tbo-names parity-0.25.3 \
	check-cann-headers cann-sim-toolkit ggml-cann ggml-cann-check ggml-cann-release-check \
	upstream-check callsite-check bisect-check ascend-ci-replay clean

all: setup

# The development install is editable in setuptools' strict mode: a tree of links to the
# sources under build/__editable__.cannops-*/cannops/, on the venv's path, which type
# checkers and editors follow (the default mode's import hook they cannot); the native
# modules built in place are found beside their sources (native/__init__.py). Strict mode
# links each file, so the link tree is made again when the package's files change: their
# list is kept in build/ (rewritten only when it differs; a removed build/ is remade too).
LINK_TREE_FILES := build/.cannops-files
PACKAGE_FILES := $(sort $(wildcard cli/*.py cli/engine/*.py cases/*.py backend/*.py backend/*/*.py \
	backend/*/*/*.py native/*.py native/*.c native/*.h))
$(shell mkdir -p build && echo '$(PACKAGE_FILES)' > $(LINK_TREE_FILES).new && \
	{ cmp -s $(LINK_TREE_FILES).new $(LINK_TREE_FILES) && rm $(LINK_TREE_FILES).new || \
	  mv $(LINK_TREE_FILES).new $(LINK_TREE_FILES); })

# Byte-compile the sources where Python looks for them (the link tree): with
# PYTHONDONTWRITEBYTECODE set, every `ops` command would otherwise compile them again (a
# quarter of `ops list cases`); up-to-date files are skipped.
setup: $(STAMP) $(NATIVE_STAMP)
	@$(PY) -m compileall -q build/__editable__.cannops-*/cannops bench > /dev/null

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml $(LINK_TREE_FILES) | $(VENV)/bin/python
	CANNOPS_NATIVE=make $(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=strict
	touch $@

$(NATIVE_STAMP): pyproject.toml $(NATIVE_SRC) | $(STAMP)
	GGML_HOME="$(GGML_HOME)" $(PY) -m cannops.native.build
	touch $@

# Rebuild the native modules unconditionally (e.g. with GGML_HOME=...).
native: $(STAMP)
	GGML_HOME="$(GGML_HOME)" $(PY) -m cannops.native.build
	touch $(NATIVE_STAMP)

# The main job: every case on every available device but the reference.
run: setup
	$(OPS) test -j 2

test: setup
	$(PY) -m pytest tests

# TBO=<path to test-backend-ops> adds issue 23's ratios against it (PAIRS=3 paired runs
# for medians; WHOLE=1 adds the whole catalog, long)
bench: setup
	$(PY) bench/run.py $(if $(TBO),--tbo $(TBO)) $(if $(PAIRS),--pairs $(PAIRS)) $(if $(WHOLE),--whole)

# ggml 0.25.3's CPU backend and test-backend-ops from the llama-cpp-python sdist (the
# ggml-cann build's `cpu` variant, no toolkit): build/ggml-cpu/prefix, for `make native
# GGML_HOME=$(CURDIR)/build/ggml-cpu/prefix` and the name lists below (2.5-5 min on 2 cores;
# a rebuild only relinks what changed).
GGML_CPU_BIN := build/ggml-cpu/prefix/bin/test-backend-ops
ggml-cpu: $(GGML_CPU_BIN)
$(GGML_CPU_BIN): | $(STAMP)
	$(PY) -m cannops.native.ggml_cann_build cpu

# The same build with llama.cpp's test-export-graph-ops (a model's graph nodes as a
# --test-file: docs/models.md) and the libllama and llama-common it links, into the same
# prefix (about 60 more files: 35 min on 2 cores at load 10; `make ggml-cpu` later leaves
# the llama part out of its configuration again, its files in the prefix kept).
GGML_CPU_EXPORT := build/ggml-cpu/prefix/bin/test-export-graph-ops
ggml-cpu-export: $(GGML_CPU_EXPORT)
$(GGML_CPU_EXPORT): | $(STAMP)
	EXPORT_GRAPH_OPS=1 $(PY) -m cannops.native.ggml_cann_build cpu

# ggml 0.25.3's CPU backend through ops: the bridge rebuilt against that prefix, every op's
# sample (--sample: the same cases in every run) of the 0.25.3 catalog on GGML-CPU, then
# of the v0.20.2 catalog (the test suite's, which runs on whichever ggml the bridge has:
# older case graphs replayed on a newer ggml); the bridge goes back to the wheel's ggml
# afterwards, whatever happened. Results: build/ggml-cpu-check/<catalog>.json. 600 s a
# case: the inputs of 128 q4_K experts take 25 s to quantize alone (ggml_quantize_chunk,
# one thread), over 60 s at -j 2 on 2 loaded cores.
GGML_CPU_SAMPLE ?= 10
GGML_CPU_CHECK := --sample $(GGML_CPU_SAMPLE) -j 2 --timeout 600
ggml-cpu-check: setup $(GGML_CPU_BIN)
	mkdir -p build/ggml-cpu-check
	$(MAKE) native GGML_HOME=$(CURDIR)/build/ggml-cpu/prefix && \
	    $(OPS) list devices | grep 'library: .*(ggml 0\.25\.3,' && \
	    $(OPS) test -b GGML-CPU --catalog 0.25.3 $(GGML_CPU_CHECK) --results build/ggml-cpu-check/0.25.3.json && \
	    $(OPS) test -b GGML-CPU --catalog 0.20.2 $(GGML_CPU_CHECK) --results build/ggml-cpu-check/0.20.2.json; \
	    status=$$?; $(MAKE) native; exit $$status

# test-backend-ops' case names of ggml 0.25.3, listed from its CPU build (TBO_BIN, built
# above unless given; source TBO_SRC) into build/tbo-names/0.25.3/{support,test}.tsv (about
# 6 minutes), and the catalog's parity with them per op (`make parity-0.25.3`;
# OPS_PARITY_VERSIONS=1 runs the slow test).
TBO_BIN ?= $(GGML_CPU_BIN)
TBO_SRC ?= build/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-backend-ops.cpp
TBO_NAMES := build/tbo-names/0.25.3
tbo-names: $(TBO_NAMES)/test.tsv
$(TBO_NAMES)/test.tsv: cases/tbo_names.py | $(TBO_BIN)
	$(PY) -m cannops.cases.tbo_names $(TBO_BIN) $(TBO_SRC) $(TBO_NAMES)

parity-0.25.3: setup $(TBO_NAMES)/test.tsv
	$(PY) -m cannops.cases.tbo_names --compare 0.25.3 $(TBO_NAMES)
	OPS_PARITY_VERSIONS=1 $(PY) -m pytest -q tests/test_parity_versions.py

# The slow build paths: the bridge built against a plain install prefix (GGML_HOME) and
# loaded without LD_LIBRARY_PATH (OPS_TEST_GGML_PREFIX=<prefix> picks a real ggml install);
# the wheel installed in a fresh venv, running from a folder outside the checkout every
# command make test covers on the simulator (tests/test_install.py).
check-install: setup
	OPS_BUILD_TESTS=1 $(PY) -m pytest tests/test_build.py tests/test_install.py

# Compile the aclnn layer's own declarations against the real CANN headers of the
# toolkit the CANN device would use; no toolkit is an error (exit 2) unless
# ALLOW_NO_CANN=1 (a CI machine without CANN).
check-cann-headers: setup
	$(PY) -m cannops.native.build --check-cann-headers $(if $(ALLOW_NO_CANN),--allow-no-toolkit)

# The CANN simulator as a CANN toolkit (headers, libascendcl / libnnopbase / libopapi /
# libacl_op_compiler over the simulator, set_env.sh): unmodified C/C++ clients build and
# run against it on any CPU.
TOOLKIT := build/cann-sim-toolkit
cann-sim-toolkit: $(TOOLKIT)/cann-sim.json
$(TOOLKIT)/cann-sim.json: $(NATIVE_STAMP) native/cann_sim_toolkit.py backend/cann/sim/toolkit.py
	$(PY) -m cannops.backend.cann.sim.toolkit $(TOOLKIT)

# ggml-cann and test-backend-ops built against the simulated toolkit, from the pinned
# llama-cpp-python sdist (ggml 0.25.3; downloaded once, sha256-checked), another release
# (LLAMA_CPP_PYTHON=0.3.17; one not in native/ggml_sources.py's VERIFIED table needs
# LLAMA_CPP_PYTHON_SHA256=) or a local llama.cpp / ggml tree used in place
# (GGML_SRC=~/llama.cpp): $(GGML_CANN_OUT)/<variant>/ (bin/test-backend-ops, prefix/,
# source.json). VARIANTS: any of 910B 310P 910B-graph.
VARIANTS ?= 910B 310P 910B-graph
GGML_CANN_OUT ?= build/ggml-cann
GGML_SRC ?=
LLAMA_CPP_PYTHON ?=
LLAMA_CPP_PYTHON_SHA256 ?=
GGML_CANN_ENV = GGML_SRC="$(GGML_SRC)" LLAMA_CPP_PYTHON="$(LLAMA_CPP_PYTHON)" \
	LLAMA_CPP_PYTHON_SHA256="$(LLAMA_CPP_PYTHON_SHA256)" GGML_CANN_OUT="$(GGML_CANN_OUT)"
ggml-cann: cann-sim-toolkit
	$(GGML_CANN_ENV) $(PY) -m cannops.native.ggml_cann_build $(VARIANTS)

# The sample the CI runs through both runners on each built variant: test-backend-ops
# itself (op by op, as the Ascend CI does; any abort, FAIL or op without an OK line fails),
# then ops on the 910B variant through the bridge (rebuilt against its prefix, and back
# to the wheel's ggml afterwards, whatever happened). Both leave out the groups on which
# ggml-cann is wrong (docs/ggml-cann-on-cann-sim.md), which test-backend-ops fails too:
# GET_ROWS of a q8_0 view (vs0=1), SET_ROWS f16 -> f32, in test-backend-ops YaRN ROPE right
# after a case of the same shape without it (a stale rope cache); ops also skips kv=16384
# attention, for time.
# (and ROPE: see SAMPLE_ROPE_P)
SAMPLE_OPS := ADD,MUL_MAT,SOFT_MAX,GET_ROWS,SET_ROWS,CPY,RMS_NORM,FLASH_ATTN_EXT
SAMPLE_TBO := -p 'MUL_MAT=type_a=(f16|q4_0),type_b=f32' -p 'ROPE=ne_a=\[128,32,2,1\].*ef=0\.0' \
	-p 'FLASH_ATTN_EXT=hsk=(64|128),hsv=(64|128),nh=4,nr23=\[1,1\],kv=512,nb=(1|3),' \
	-p 'GET_ROWS=^(?!type=q8_0.*vs0=1)' -p 'SET_ROWS=^(?!type_src=f16,type_dst=f32)'
SAMPLE_OPS_P := ^(?!.*type_src=f16)(?!.*type=q8_0.*vs0=1)(?!.*kv=16384)
# ROPE on its own, one shape without YaRN: ops' workers keep ggml-cann's rope cache from
# case to case in an order of their own, and the cache overruns (or goes stale) when the
# rope dims or YaRN change at the same positions (docs/ggml-cann-on-cann-sim.md)
SAMPLE_ROPE_P := ne_a=\[128,32,2,1\].*ef=0\.0
# Then the device work count's planted-call check (tests/test_cost_planted.py: a copy of the
# tree with one aclnn call more, built as a 910B variant of its own, a few minutes).
# The 310P variant: ggml-cann has no FLASH_ATTN_EXT there (by design), and it lets bf16
# ADD through although the 310P has no bf16 (an abort per case: a ggml-cann finding).
SAMPLE_OPS_310P := ADD,MUL_MAT,SOFT_MAX,ROPE,GET_ROWS,SET_ROWS,CPY,RMS_NORM
SAMPLE_TBO_310P := -p 'ADD=^(?!type=bf16)'
# ACL graph mode against eager, counted: ops perf on GGML-CANN0 times one graph many times
# over, which the 910B-graph variant captures once and replays (tests/test_cost_graph.py)
GRAPH_COST := build/cost-graph
GRAPH_PERF = mkdir -p $(GRAPH_COST) && $(OPS) perf -b GGML-CANN0 -o ADD,SOFT_MAX,MUL_MAT --min-time 0.2 \
	-p 'ne=\[4096,1,1,1\],nr=\[1,1,1,1\]|ne=\[1024,1024,10,1\]|type_a=f16,type_b=f32,m=4096,n=1,k=14336'
ggml-cann-check: ggml-cann
	for v in $(filter-out 310P,$(VARIANTS)); do $(OPS) tbo $(GGML_CANN_OUT)/$$v/bin/test-backend-ops \
	    -o $(SAMPLE_OPS),ROPE $(SAMPLE_TBO) --require-clean || exit 1; done
	$(if $(filter 310P,$(VARIANTS)),$(OPS) tbo $(GGML_CANN_OUT)/310P/bin/test-backend-ops \
	    -o $(SAMPLE_OPS_310P) $(SAMPLE_TBO) $(SAMPLE_TBO_310P) --require-clean)
	OPS_REQUIRE_GGML_SOURCES=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_cann_evidence.py \
	    -k test_ggml_cann_facts_match_its_0_25_3_sources
	OPS_COST_PLANTED=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_cost_planted.py
	$(MAKE) native GGML_HOME=$(abspath $(GGML_CANN_OUT))/910B/prefix
	. $(GGML_CANN_OUT)/910B/env.sh && \
	    $(OPS) test -b GGML-CANN0 -o $(SAMPLE_OPS) -p '$(SAMPLE_OPS_P)' -j 2 --timeout 600 && \
	    $(OPS) test -b GGML-CANN0 -o ROPE -p '$(SAMPLE_ROPE_P)' -j 2 --timeout 600 && \
	    $(GRAPH_PERF) --results $(GRAPH_COST)/910B.json && \
	    $(if $(filter 910B-graph,$(VARIANTS)),$(MAKE) native GGML_HOME=$(abspath $(GGML_CANN_OUT))/910B-graph/prefix && \
	    . $(GGML_CANN_OUT)/910B-graph/env.sh && $(GRAPH_PERF) --results $(GRAPH_COST)/910B-graph.json && \
	    OPS_COST_GRAPH=$(GRAPH_COST) $(PY) -m pytest -q -p no:cacheprovider tests/test_cost_graph.py,true); \
	    status=$$?; $(MAKE) native; exit $$status

# The ggml-cann findings filed-ready (docs/upstream/): each report's smallest case run by
# test-backend-ops of the variants built under GGML_CANN_OUT (910B required; 310P where
# built), and its reproducer written by ops repro -b GGML-CANN0 into build/upstream/, built
# and run without Python: each must still show its fault (tests/test_upstream.py). The
# bridge goes on the 910B prefix for it, then (where built) on the 310P's for the 310P's
# reproducers, and back to the wheel's ggml afterwards.
UPSTREAM_PYTEST = UPSTREAM_CHECK_BUILD=$(abspath $(GGML_CANN_OUT)) UPSTREAM_CHECK_REQUIRED=1 UPSTREAM_CHECK_REPRO=1 \
	$(PY) -m pytest -q -p no:cacheprovider tests/test_upstream.py
upstream-check: setup
	$(MAKE) native GGML_HOME=$(abspath $(GGML_CANN_OUT))/910B/prefix
	$(UPSTREAM_PYTEST); status=$$?; \
	if [ $$status = 0 ] && [ -x $(GGML_CANN_OUT)/310P/bin/test-backend-ops ]; then \
	    $(MAKE) native GGML_HOME=$(abspath $(GGML_CANN_OUT))/310P/prefix && \
	    UPSTREAM_CHECK_BRIDGE=310P $(UPSTREAM_PYTEST) -k reproducer; status=$$?; \
	fi; $(MAKE) native; exit $$status

# Call sites and the numeric blame on ggml-cann (docs/trace-and-blame.md): a copy of the
# pinned release's ggml with faults planted (tests/plant_ggml_cann.py: a refused scalar, a
# wrong one) built as the 910B variant under CALLSITE_OUT (a rerun recompiles nothing),
# and the blames of its FAILs, and of a precision fault planted in the simulator, checked;
# ops repro's calls too, through the bridge (on the planted prefix, then back on the wheel).
CALLSITE_OUT ?= build/callsite-check
callsite-check: cann-sim-toolkit
	mkdir -p $(CALLSITE_OUT)
	$(PY) tests/plant_ggml_cann.py "$$($(PY) -c 'from cannops.native.ggml_sources import llama_cpp; print(llama_cpp())')" \
	    $(CALLSITE_OUT)/src > $(CALLSITE_OUT)/plants.json
	$(MAKE) ggml-cann VARIANTS=910B GGML_SRC=$(CALLSITE_OUT)/src GGML_CANN_OUT=$(CALLSITE_OUT)/ggml-cann
	$(MAKE) native GGML_HOME=$(abspath $(CALLSITE_OUT))/ggml-cann/910B/prefix
	CALLSITE_CHECK_BUILD=$(abspath $(CALLSITE_OUT)) CALLSITE_CHECK_REPRO=1 \
	    $(PY) -m pytest -q -p no:cacheprovider tests/test_callsite_ggml.py; status=$$?; $(MAKE) native; exit $$status

# ops bisect with real builds: a ten-commit history made from the pinned release's ggml
# (one commit plants a wrong SCALE factor into ggml-cann, one does not compile), bisected
# both ways (--fixed too) on the 910B variant; several minutes (each step recompiles what
# the commit changed).
bisect-check: cann-sim-toolkit
	OPS_BISECT_BUILD=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_bisect_build.py -s --basetemp=$(CURDIR)/build/bisect-check

# An older release (CI_RELEASE, llama-cpp-python 0.3.17: ggml 0.9.8) built as the 910B
# variant into build/ggml-cann-$(CI_RELEASE), and the CI sample through its
# test-backend-ops, op by op (the same ops and filters as ggml-cann-check; 0 FAIL, no abort).
CI_RELEASE ?= 0.3.17
CI_RELEASE_OUT ?= build/ggml-cann-$(CI_RELEASE)
ggml-cann-release-check: cann-sim-toolkit
	$(MAKE) ggml-cann VARIANTS=910B LLAMA_CPP_PYTHON=$(CI_RELEASE) GGML_CANN_OUT=$(CI_RELEASE_OUT)
	$(OPS) tbo $(CI_RELEASE_OUT)/910B/bin/test-backend-ops \
	    -o $(SAMPLE_OPS),ROPE $(SAMPLE_TBO) --require-clean

# The Ascend CI's two shared reports replayed at their ggml (ggml-org/ggml trees unpacked
# from GGML_MIRROR=DIR, the git directory of a ggml-org/ggml clone) and at 0.3.17, the CI's ops through `ops tbo -j 2` on the
# simulated 910B, and docs/ascend-ci-replay.md written from the runs (bench/ascend_ci_replay.py;
# consoles and results in build/replay/; a finished run is kept). Each of the three runs:
# 3 to 6 min on 2 loaded cores; a build: up to 3 min.
ascend-ci-replay: cann-sim-toolkit
	$(PY) bench/ascend_ci_replay.py trees && $(PY) bench/ascend_ci_replay.py build && \
	    $(PY) bench/ascend_ci_replay.py run && $(PY) bench/ascend_ci_replay.py doc

clean:
	rm -rf $(VENV) native/*.so native/.built native/_build
