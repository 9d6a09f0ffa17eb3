# luacoll: `make run` builds and runs the tour on 4 host ranks; `make test` runs every test.
GO       ?= go
VERSION  ?= 0.1.0-dev
REVISION := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.revision=$(REVISION)
BIN      := bin/luacoll
# staticcheck, pinned; `make lint` installs it into bin/ through the Go toolchain.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck
# go-nvml's cgo preamble calls deprecated NVML entry points; keep the build quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build run test lint docs fuzz gpu-bins clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

run: build
	./$(BIN) run -n 4

# Every test: formatting and lint (go vet, staticcheck), a short run of
# each fuzz target, and the race detector over all packages, whose results
# print as go test prints them, then, last, one line of the tests that
# skipped, grouped by why (scripts/testsummary; README, Tests).
test: build lint
	$(MAKE) --no-print-directory fuzz FUZZTIME=20000x
	$(GO) build -o bin/testsummary ./scripts/testsummary
	$(GO) test -race -timeout 15m -json ./... | bin/testsummary

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@[ -x $(STATICCHECK) ] && $(STATICCHECK) -version | grep -q '$(STATICCHECK_VERSION:v%=%)' || \
	  GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(STATICCHECK) ./...

# FUZZTIME is a duration (20s) or a count of executions (20000x); counts
# end cleanly where a duration can stop the fuzzer mid-run on a loaded machine.
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzRankEnv$$' -fuzztime $(FUZZTIME) ./engine/launch
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./engine/launch/cpuset
	$(GO) test -run '^$$' -fuzz '^FuzzReadPart$$' -fuzztime $(FUZZTIME) ./engine/trace
	$(GO) test -run '^$$' -fuzz '^FuzzAppendString$$' -fuzztime $(FUZZTIME) ./engine/trace
	$(GO) test -run '^$$' -fuzz '^FuzzParseOverride$$' -fuzztime $(FUZZTIME) ./transport
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./transport/knobs
	$(GO) test -run '^$$' -fuzz '^FuzzUnseal$$' -fuzztime $(FUZZTIME) ./transport/net
	$(GO) test -run '^$$' -fuzz '^FuzzLuaArgs$$' -fuzztime $(FUZZTIME) ./luabind
	$(GO) test -run '^$$' -fuzz '^FuzzReduceArgs$$' -fuzztime $(FUZZTIME) ./luabind
	$(GO) test -run '^$$' -fuzz '^FuzzParseLayout$$' -fuzztime $(FUZZTIME) ./luabind/simrank
	$(GO) test -run '^$$' -fuzz '^FuzzSimulatedArgs$$' -fuzztime $(FUZZTIME) ./luabind/simrank
	$(GO) test -run '^$$' -fuzz '^FuzzParseDTypeRedOp$$' -fuzztime $(FUZZTIME) ./kernels
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeList$$' -fuzztime $(FUZZTIME) ./engine/plan
	$(GO) test -run '^$$' -fuzz '^FuzzParseOp$$' -fuzztime $(FUZZTIME) ./engine/plan
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./engine/plan/verify
	$(GO) test -run '^$$' -fuzz '^FuzzEstimate$$' -fuzztime $(FUZZTIME) ./engine/plan/cost
	$(GO) test -run '^$$' -fuzz '^FuzzParseModel$$' -fuzztime $(FUZZTIME) ./engine/plan/cost
	$(GO) test -run '^$$' -fuzz '^FuzzExpandAttached$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzParseMemLimit$$' -fuzztime $(FUZZTIME) .
	$(GO) test -run '^$$' -fuzz '^FuzzSplitArgs$$' -fuzztime $(FUZZTIME) ./repl
	$(GO) test -run '^$$' -fuzz '^FuzzRuns$$' -fuzztime $(FUZZTIME) ./engine/bootstrap

docs: build
	./$(BIN) docs -o docs/lua-api.md
	./$(BIN) docs --knobs -o docs/tuning.md

# Test binaries for the GPU machine (run there with scripts/gpu-check.sh).
gpu-bins: build
	$(GO) test -c -o bin/cuda.test ./cuda
	$(GO) test -c -o bin/kernels.test ./kernels
	$(GO) test -c -o bin/gpu.test ./transport/gpu
	$(GO) test -c -o bin/transport.test ./transport
	$(GO) test -c -o bin/trace.test ./engine/trace

clean:
	rm -rf bin
