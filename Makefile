# avfs — the two set-up commands are `make demo` and `make test` (see README).
GO        ?= go
BIN       := bin/avfs
STATICCHECK_VERSION := v0.8.2

.PHONY: build test deps lint vet staticcheck bench demo clean

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/avfs

# deps installs what the tests need on a fresh Debian machine (idempotent).
deps:
	@bash scripts/deps.sh

vet:
	$(GO) vet ./...

staticcheck:
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...

lint: vet staticcheck

# The whole suite: race detector on, nothing cached.
test: deps lint
	$(GO) test -race -count=1 ./...

# Benchmarks the brief names, each beside a baseline measured in the same run.
# BENCH_ARGS picks a part, e.g. BENCH_ARGS="-sections mount" (see -help).
bench: build
	$(GO) run ./internal/bench/cmd/avfsbench $(BENCH_ARGS)

demo: build
	@bash scripts/demo.sh

clean:
	rm -rf bin
