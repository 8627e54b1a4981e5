# triage — see README.md. Every target works on a fresh Debian machine with Go.
GO       ?= go
PKGS     ?= ./...
FUZZTIME ?= 30s

.PHONY: test build lint fuzz bench demo clean

## test: vet and race-test everything against a throwaway PostgreSQL cluster
test:
	.ci/with-test-db sh -c '$(GO) vet $(PKGS) && $(GO) test -race -count=1 -timeout 20m $(PKGS)'

## build: the triage and fakeprovider binaries into ./bin
build:
	$(GO) build -o bin/ ./cmd/...

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## fuzz: run each fuzz target for FUZZTIME
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzClassify -fuzztime=$(FUZZTIME) ./classify
	$(GO) test -run='^$$' -fuzz='^FuzzReadJSONL$$' -fuzztime=$(FUZZTIME) ./worker
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./worker/config
	$(GO) test -run='^$$' -fuzz='^FuzzBoundary$$' -fuzztime=$(FUZZTIME) ./ledger/redact

## bench: benchmarks (the worker ones need a database)
bench:
	.ci/with-test-db $(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

## demo: the embedded default (private cluster in .triage/pg, in-process fake provider)
demo:
	.ci/ensure-postgres
	$(GO) run ./cmd/triage demo

## clean: stop and remove the private cluster (its shadow directory too) and the binaries
clean:
	-$(GO) run ./cmd/triage db stop --remove
	rm -rf bin .triage
