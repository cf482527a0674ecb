# paxcron developer targets. `make help` lists them.
#
# Tools are pinned in the separate tools module (tools/go.mod) and installed
# into tools/bin; nothing here touches the main module's go.mod.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go

# Seeds for the quick simulation run by `make test`, and for `make sim`.
TEST_SEEDS ?= 300
# Calm seeds (a fault every 5 s on average, not every 0.7 s) leave healthy
# intervals between faults, in which the simulator holds launches to the
# lateness bound; make test runs them before TEST_SEEDS.
CALM_SEEDS ?= 100
SEEDS ?= 1000
# Extra flags for the simulator (e.g. SIM_FLAGS='-start 5000 -replicas 5').
SIM_FLAGS ?=
# Flags for `make demo` (e.g. DEMO_FLAGS='-duration 2m -every 10').
DEMO_FLAGS ?=
# Extra flags for `go test` in `make test` (e.g. TEST_FLAGS='-count=1 -v').
TEST_FLAGS ?=
# Benchmark selection and duration for `make gobench`.
BENCH ?= .
BENCHTIME ?= 1s
BENCH_PKGS ?= ./...
# The side-by-side suites `make bench` runs, in order (tools/bench/run -h).
BENCH_SUITES ?= all
# How long `make chaos` runs its fault schedule, and its extra flags
# (e.g. CHAOS_FLAGS='-seed 7'; go run ./cmd/paxcron-chaos -h lists them).
DURATION ?= 6m
CHAOS_FLAGS ?=
# How long each fuzz target runs in `make fuzz`.
FUZZTIME ?= 10s
# Packages searched for fuzz targets by `make fuzz`.
FUZZ_PKGS ?= ./...
# Only the fuzz targets whose name matches this grep -E pattern.
FUZZ_MATCH ?= .

TOOLS_BIN := $(CURDIR)/tools/bin
STATICCHECK := $(TOOLS_BIN)/staticcheck

# The Nomad agent of the integration tests (nomad/nomadtest), built by
# `make nomad` from the tools/nomad module (Nomad is BUSL-licensed: built
# here, never committed).
NOMAD_BUILT := $(CURDIR)/tools/nomad/bin/nomad
# The one `make test` hands them in NOMAD_BIN: NOMAD_BIN if set, else nomad
# on PATH, else NOMAD_BUILT (which `make test` then builds first if missing).
ifeq ($(strip $(NOMAD_BIN)),)
NOMAD_BIN := $(or $(shell command -v nomad 2>/dev/null),$(NOMAD_BUILT))
endif

# Every Go file of the tree, skipping dot directories (.git, .cache).
GOFILES = $(shell find . -path './.*' -prune -o -name '*.go' -type f -print)

.DEFAULT_GOAL := help

.PHONY: help build lint fmt test sim demo bench gobench chaos fuzz tools nomad clean

help: ## List the targets and the variables they take.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "Variables: TEST_SEEDS=$(TEST_SEEDS) CALM_SEEDS=$(CALM_SEEDS) SEEDS=$(SEEDS) SIM_FLAGS=$(SIM_FLAGS) TEST_FLAGS=$(TEST_FLAGS) DEMO_FLAGS=$(DEMO_FLAGS)"
	@echo "           BENCH_SUITES=$(BENCH_SUITES) BENCH=$(BENCH) BENCHTIME=$(BENCHTIME) BENCH_PKGS=$(BENCH_PKGS)"
	@echo "           DURATION=$(DURATION) CHAOS_FLAGS=$(CHAOS_FLAGS) FUZZTIME=$(FUZZTIME) FUZZ_PKGS=$(FUZZ_PKGS) FUZZ_MATCH=$(FUZZ_MATCH)"

build: ## Compile every package, and the ./cmd/... binaries into bin/.
	$(GO) build ./...
	@mains="$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./cmd/... 2>/dev/null)"; \
	if [ -z "$$mains" ]; then echo "build: no commands under ./cmd yet"; exit 0; fi; \
	mkdir -p bin; \
	echo "$(GO) build -o bin/" $$mains; \
	$(GO) build -o bin/ $$mains

lint: $(STATICCHECK) ## gofmt (must list nothing), go vet, staticcheck, determinism lint.
	@status=0; \
	echo "gofmt -l"; out="$$(gofmt -l $(GOFILES))"; \
	if [ -n "$$out" ]; then echo "$$out" | sed 's/^/gofmt: needs formatting (make fmt): /'; status=1; fi; \
	echo "$(GO) vet ./..."; $(GO) vet ./... || status=1; \
	echo "staticcheck ./..."; $(STATICCHECK) ./... || status=1; \
	echo "detlint"; $(GO) run ./internal/detlint/cmd/detlint || status=1; \
	if [ $$status -ne 0 ]; then echo "lint: FAILED"; else echo "lint: ok"; fi; \
	exit $$status

fmt: ## Rewrite every Go file with gofmt.
	gofmt -w $(GOFILES)

test: export NOMAD_BIN := $(NOMAD_BIN)
test: $(if $(filter $(NOMAD_BUILT),$(NOMAD_BIN)),$(NOMAD_BUILT)) ## Unit and Nomad integration tests (race detector, shuffled), the simulator's own tests and the launcher's (its randomized model test in full) without it, then CALM_SEEDS calm seeds and TEST_SEEDS seeds.
	$(GO) test -race -shuffle=on $(TEST_FLAGS) ./...
	$(GO) test -shuffle=on $(TEST_FLAGS) ./sim ./cron/launcher
	$(GO) test -tags hoptrace $(TEST_FLAGS) ./internal/hoptrace
	$(GO) run ./cmd/paxcron-sim -seeds $(CALM_SEEDS) -start 5000000 -fault-every 5s $(SIM_FLAGS)
	$(GO) run ./cmd/paxcron-sim -seeds $(TEST_SEEDS) $(SIM_FLAGS)

demo: export NOMAD_BIN := $(NOMAD_BIN)
demo: build $(if $(filter $(NOMAD_BUILT),$(NOMAD_BIN)),$(NOMAD_BUILT)) ## Nomad dev agent + 3 paxcron server processes: a cron job every 5 s, the leader SIGKILLed half-way, each slot checked in Nomad (DEMO_FLAGS).
	bin/paxcron-demo -paxcron bin/paxcron $(DEMO_FLAGS)

sim: ## Run SEEDS simulation seeds (pass SIM_FLAGS, e.g. '-start 1000').
	$(GO) run ./cmd/paxcron-sim -seeds $(SEEDS) $(SIM_FLAGS)

bench: export NOMAD_BIN := $(NOMAD_BIN)
bench: build $(if $(filter $(NOMAD_BUILT),$(NOMAD_BIN)),$(NOMAD_BUILT)) ## Benchmarks with their comparators (commit throughput against raw Pebble; etcd, Nomad's periodic dispatcher, failover, scale): tables and PNG plots into docs/bench (BENCH_SUITES).
	bash tools/bench/run $(BENCH_SUITES)

gobench: ## Go benchmarks matching BENCH in BENCH_PKGS, BENCHTIME each.
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem $(BENCH_PKGS)

chaos: export NOMAD_BIN := $(NOMAD_BIN)
chaos: $(if $(filter $(NOMAD_BUILT),$(NOMAD_BIN)),$(NOMAD_BUILT)) ## Three replicas in containers + Nomad under a seeded fault schedule for DURATION, then an independent check of every slot (CHAOS_FLAGS).
	$(GO) run ./cmd/paxcron-chaos -duration $(DURATION) $(CHAOS_FLAGS)

fuzz: ## Every Fuzz* target in FUZZ_PKGS for FUZZTIME each; ends with the executions and failures in all.
	FUZZTIME='$(FUZZTIME)' FUZZ_PKGS='$(FUZZ_PKGS)' FUZZ_MATCH='$(FUZZ_MATCH)' bash tools/fuzz/run

tools: $(STATICCHECK) ## Install the pinned tools into tools/bin.

# Reinstalled whenever the pins change. `go install tool` installs every
# tool directive of tools/go.mod.
$(STATICCHECK): tools/go.mod tools/go.sum
	GOBIN=$(TOOLS_BIN) $(GO) -C tools install tool
	@touch $@

nomad: $(NOMAD_BUILT) ## Build the Nomad agent for the tests into tools/nomad/bin (when missing or tools/nomad/go.mod changed).

# Rebuilt whenever the pin changes. The first build downloads Nomad's
# modules (GBs) and takes minutes; later ones come from the caches.
$(NOMAD_BUILT): tools/nomad/go.mod tools/nomad/go.sum
	$(GO) -C tools/nomad build -o bin/nomad github.com/hashicorp/nomad
	@touch $@
	@$@ version | sed -n 1p

clean: ## Remove bin/ and tools/bin/.
	rm -rf bin tools/bin
