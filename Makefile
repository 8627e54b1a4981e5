# triage — see README.md. Every target works on a fresh Debian machine with Go.
GO       ?= go
PKGS     ?= ./...
FUZZTIME ?= 30s
# soak: how many nights of the night simulator, from which seed, or for how
# long (SOAK_TIME=30m wins over SEEDS); RACE=-race to run them under the
# race detector (about half as many nights an hour).
SEEDS     ?= 1000
FIRST     ?= 1000
SOAK_TIME ?=
RACE      ?=
# PARALLEL nights at once: a night mostly waits on its schedule.
PARALLEL  ?= 8

.PHONY: test tidy-check build lint fuzz bench soak stormy demo clean

## test: gofmt and go mod tidy clean, then vet and race-test everything
## (browser tests included: Chromium is installed with apt when missing)
## against a throwaway PostgreSQL cluster
test: tidy-check
	.ci/ensure-chromium
	.ci/with-test-db sh -c '$(GO) vet $(PKGS) && $(GO) test -race -count=1 -timeout 20m $(PKGS)'

## tidy-check: fail when gofmt or `go mod tidy` would change anything
tidy-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

## build: the triage and fakeprovider binaries into ./bin
build:
	$(GO) build -o bin/ ./cmd/...

## lint: gofmt, go mod tidy and go vet
lint: tidy-check
	$(GO) vet $(PKGS)

## fuzz: run each fuzz target for FUZZTIME
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzClassify -fuzztime=$(FUZZTIME) ./classify
	$(GO) test -run='^$$' -fuzz='^FuzzReadJSONL$$' -fuzztime=$(FUZZTIME) ./worker/enqueue
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./worker/config
	$(GO) test -run='^$$' -fuzz='^FuzzBoundary$$' -fuzztime=$(FUZZTIME) ./ledger/redact

## bench: benchmarks (the worker ones need a database). The night benchmark
## (BenchmarkNight) takes TRIAGE_BENCH_NIGHT records (100000), and
## TRIAGE_BENCH_NIGHT_ROUNDS, _LATENCY and _RPM; BENCH=regexp runs only some
BENCH ?= .
bench:
	.ci/with-test-db $(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -timeout 0 $(PKGS)

## soak: the night simulator (worker/nightsim) over SEEDS seeds from FIRST,
## or for SOAK_TIME; a failing night prints the -seed that replays it
soak:
	.ci/with-test-db sh -c 'NIGHTSIM_SEEDS=$(SEEDS) NIGHTSIM_FIRST=$(FIRST) NIGHTSIM_SOAK_TIME=$(SOAK_TIME) NIGHTSIM_PARALLEL=$(PARALLEL) \
		$(GO) test $(RACE) -count=1 -timeout 0  -run "^TestNight$$" ./worker/nightsim'

## stormy: the stormy overnight batch (600 records, replay off) under each
## ambiguous policy; `make test` runs it with 200 records
stormy:
	.ci/with-test-db sh -c 'TRIAGE_STORMY_RECORDS=600 $(GO) test -race -count=1 -timeout 20m -run "^TestStormyBatch" ./worker'

## demo: the embedded default (private cluster in .triage/pg, in-process fake provider);
## ends by printing the batch's dead-letter page and serves it until Ctrl-C.
## It runs the built binary: `go run` exits 1 when Ctrl-C interrupts it,
## even though the demo itself exits 0.
demo:
	.ci/ensure-postgres
	$(GO) build -o bin/ ./cmd/triage
	bin/triage demo

## clean: stop and remove the private cluster (its shadow directory too) and the binaries
clean:
	-$(GO) run ./cmd/triage db stop --remove
	rm -rf bin .triage
