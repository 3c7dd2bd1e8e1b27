# avfs — the two set-up commands are `make demo` and `make test` (see README).
GO        ?= go
BIN       := bin/avfs
PREFIX    ?= /usr/local
STATICCHECK_VERSION := v0.8.2

.PHONY: build install uninstall test test-go test-npm test-python deps lint vet staticcheck bench demo release clean

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/avfs

# install puts bin/avfs on PATH: $(DESTDIR)$(PREFIX)/bin/avfs (PREFIX
# defaults to /usr/local; PREFIX=$$HOME/.local needs no root).
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/avfs

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/avfs

# deps installs what the tests need on a fresh Debian machine (idempotent).
deps:
	@bash scripts/deps.sh

vet:
	$(GO) vet ./...

staticcheck:
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...

lint: vet staticcheck

# The whole suite: the Go tests (race detector on, nothing cached), then
# the npm and pip packages built from the tree, installed offline and
# driven end to end.
test: deps lint test-go test-npm test-python

test-go:
	$(GO) test -race -count=1 ./...

test-npm: build
	AVFS_BIN_PATH=$(CURDIR)/$(BIN) bash npm/scripts/test.sh

test-python: build
	AVFS_BIN_PATH=$(CURDIR)/$(BIN) bash python/scripts/test.sh

# Benchmarks the brief names, each beside a baseline measured in the same run.
# BENCH_ARGS picks a part, e.g. BENCH_ARGS="-sections mount" (see -help).
bench: build
	$(GO) run ./internal/bench/cmd/avfsbench $(BENCH_ARGS)

demo: build
	@bash scripts/demo.sh

# Release builds: linux and darwin × amd64 and arm64, CGO_ENABLED=0, the
# npm packages (dist/npm/*.tgz) and the Python sdist and wheels
# (dist/python/), ready to publish, with dist/SHA256SUMS; VERSION=v1.2.3
# stamps the binaries' version (PACKAGES=0: binaries only).
release:
	bash scripts/release.sh $(VERSION)

clean:
	rm -rf bin dist
