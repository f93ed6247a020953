# fenec — build, test, benchmark.
GO      ?= go
BIN     := bin
PKGS    := ./...
export CGO_ENABLED ?= 0

.PHONY: build test vet fuzz bench run clean

build:
	$(GO) build -o $(BIN)/ ./cmd/...

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

# The whole suite, race detector on (it needs cgo).
test: vet
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(MAKE) fuzz

# Each fuzz target briefly; the seeds run in `test` already.
FUZZTIME ?= 10s
fuzz:
	@for t in $$($(GO) test -list '^Fuzz' ./engine/... | grep '^Fuzz'); do \
	  pkg=$$(grep -rl "func $$t(" --include='*_test.go' engine | head -1 | xargs dirname); \
	  echo "fuzz $$pkg $$t"; \
	  $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; \
	done

bench:
	@mkdir -p bench
	cd bench/sqlite && $(GO) run . | tee ../engine.txt

clean:
	rm -rf $(BIN)
