# seqd — see README.md. Every target works from a clean clone with only Go.
GO      ?= go
SEEDS   ?= 200
BIN     := bin/seqd
PKGS    := ./...
FUZZTIME ?= 10s

.PHONY: all build test fmt-check vet unit sim soak bench fuzz lint demo integration clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/seqd

## test: what CI runs: format check, vet, race-enabled tests, a simulator run.
test: fmt-check vet unit sim

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## sim: deterministic simulator over seeds 1..SEEDS; ends "sim seeds=N failed=F".
sim:
	$(GO) run ./test/sim/cmd/simrun -seeds $(SEEDS)

## soak: a long simulator run plus the invariants build tag.
soak:
	$(GO) run -tags invariants ./test/sim/cmd/simrun -seeds 5000 -commands 100000

## bench: micro-benchmarks (allocations included) and the end-to-end bench.
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./wire ./sequencer ./node ./transport/... ./multicast
	$(BIN) bench --transport mem --size 256 --nodes 3 --count 3000000

## fuzz: every decoder of network bytes, FUZZTIME each.
fuzz:
	@set -e; for pkg in ./wire ./sequencer ./node ./transport/tcp; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint: fmt-check vet
	$(GO) test -count=1 -tags invariants $(PKGS) >/dev/null

## demo: the main job on embedded defaults.
demo:
	$(GO) run ./cmd/seqd demo

clean:
	rm -rf bin out
