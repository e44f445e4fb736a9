# Open NeuronCore: every target creates .venv and installs the project on first use.
# CONFIG=<preset> selects the preset everywhere (see rtl/config.py: small, default, trainium, ...);
# CONFIG=<preset>:field=value,... or CONFIG=path/to/file.toml overrides fields (rtl.config.parse_config).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
JOBS   ?= 2

# Each target has its own default preset; CONFIG=<name> overrides all of them.
SIM_CONFIG  := $(or $(CONFIG),default)
TEST_CONFIG := $(or $(CONFIG),small)
FULL_CONFIG := $(or $(CONFIG),default)
MUTATE_CONFIG := $(or $(CONFIG),small)

.PHONY: all sim lint docs test test-full bench synth synth-blocks synth-core synth-sweep verilog mutate campaign clean distclean venv

all: test

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plot]'
	touch $(STAMP)

venv: $(STAMP)

## make sim [WAVES=1]: kernels on the whole core (cycles, busy fractions, timelines in build/sim/), then the blocks' demos
## make sim KERNEL=path/to/file.py:function [CONFIG=...] [WAVES=1]: that kernel only, on golden and the RTL core, outputs checked bit for bit (CONFIG default: small; docs/core.md)
sim: $(STAMP)
	$(if $(KERNEL),CONFIG=$(or $(CONFIG),small) $(PY) -m tb.core.run_kernel '$(KERNEL)' $(if $(filter-out 0,$(WAVES)),--waves),CONFIG=$(SIM_CONFIG) $(PY) -m tb.demo)

## make lint: ruff with the narrow rule set of pyproject.toml (bugs, not style)
lint: $(STAMP)
	$(PY) -m ruff check rtl golden tb tests bench synth

## make docs: regenerate the documentation's tables from rtl/config.py, rtl/isa.py, golden and build/bench/*.json (after make bench)
docs: $(STAMP)
	$(PY) -m bench.doc_tables

## make test: lint, then the regression (small preset), RTL against the golden model bit for bit
test: $(STAMP) lint
	CONFIG=$(TEST_CONFIG) $(PY) -m pytest -n $(JOBS) --dist loadgroup -m "not full" tests

## make test-full: the long regression (default preset, millions of random cases)
test-full: $(STAMP)
	CONFIG=$(FULL_CONFIG) $(PY) -m pytest -n $(JOBS) --dist loadgroup tests

## make bench [BENCH=name]: benchmarks, one JSON file each under build/bench/
bench: $(STAMP)
	CONFIG=$(SIM_CONFIG) $(PY) -m bench $(if $(BENCH),--only $(BENCH))

## make synth [CONFIG=...]: the whole core's area table, engine by engine, for $(CONFIG) (default: default; build/synth/<config>/core_area.*; docs/synthesis.md)
## make synth BLOCKS=default|all|name,... [CONFIG=...]: the per-block report instead: area, ECP5 LUTs and Fmax per block (build/synth/<config>/area.*)
synth: $(STAMP)
	CONFIG=$(SIM_CONFIG) $(PY) -m synth $(if $(BLOCKS),--blocks $(BLOCKS),--core)

## make synth-blocks [CONFIG=...]: the per-block report of the blocks marked default in synth/blocks.py (= make synth BLOCKS=default)
synth-blocks: $(STAMP)
	CONFIG=$(SIM_CONFIG) $(PY) -m synth --blocks default

## make synth-core [CONFIG=...]: the same as make synth (the whole core's area table)
synth-core: $(STAMP)
	CONFIG=$(SIM_CONFIG) $(PY) -m synth --core

## make synth-sweep: array-size and format-configuration sweep, then the whole-core estimate checked against the flat core (small)
synth-sweep: $(STAMP)
	CONFIG=$(SIM_CONFIG) $(PY) -m synth --sweep
	$(PY) -m synth --config small --flat

## make verilog: generated Verilog of the chosen preset under build/<preset>/verilog/
verilog: $(STAMP)
	CONFIG=$(SIM_CONFIG) $(PY) -m synth.generate

## make mutate [BLOCK=name,...] [N=count] [SEED=s] [BACKEND=local|ray]: mutation testing of the RTL as campaign tasks, N (20) mutants per block (docs/mutation.md)
mutate: $(STAMP)
	CONFIG=$(MUTATE_CONFIG) $(PY) -m synth.mutate campaign --backend $(or $(BACKEND),local) --workers $(JOBS) --seed $(or $(SEED),1) $(if $(N),--n $(N)) $(if $(BLOCK),--param blocks=$(BLOCK))

## make campaign KIND=fuzz|mutate|full|activation [N=tasks] [SEED=s] [BACKEND=ray|local]: a verification campaign on Ray (embedded local Ray; RAY_ADDRESS=host:port for a cluster) or a local process pool (docs/campaigns.md)
CAMPAIGN_BACKEND := $(or $(BACKEND),ray)
$(VENV)/.campaign-stamp: $(STAMP)
	$(PY) -m pip install -q -e '.[test,plot,campaign]'
	touch $@

# the mutate kind lives in synth (synth imports tb, never the reverse): python -m synth.mutate campaign
CAMPAIGN_CMD = $(if $(filter mutate,$(KIND)),-m synth.mutate campaign,-m tb.campaign $(KIND))
campaign: $(STAMP) $(if $(filter ray,$(CAMPAIGN_BACKEND)),$(VENV)/.campaign-stamp)
	$(PY) $(CAMPAIGN_CMD) --backend $(CAMPAIGN_BACKEND) --seed $(or $(SEED),1) $(if $(N),--n $(N))

clean:
	rm -rf build

distclean: clean
	rm -rf $(VENV) *.egg-info
