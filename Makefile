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
	$(GO) vet -tags nemesis ./tests/nemesis ./engine/store ./cmd/fenec-node ./cmd/fenec-shard
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

# The whole suite, race detector on (it needs cgo); then the router's own
# loop and forwarder again without it, as they are built to run: a -race
# build leaves out their raw system calls (package rawtcp).
test: vet
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 ./internal/rawtcp ./internal/h1 ./region/forward
	$(MAKE) fuzz

# Each fuzz target briefly (their seed corpora run in `test` already), for
# a count of inputs rather than a time: Go 1.26's coordinator can report a
# bare "context deadline exceeded" when a -fuzztime duration ends while a
# worker is busy (golang/go#75804, fixed in Go 1.27), which is no finding.
# A count has no deadline to race; targets slower per input run fewer.
FUZZEXECS ?= 120000x
fuzz:
	@grep -rl --include='*_test.go' '^func Fuzz' engine node region global lease internal | xargs -n1 dirname | sort -u | while read -r d; do \
	  for t in $$(grep -h '^func Fuzz' $$d/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    case $$t in FuzzReplay) n=20000x;; FuzzHead|FuzzReadImage) n=80000x;; FuzzAdminBody|FuzzRequestFraming) n=80000x;; *) n=$(FUZZEXECS);; esac; \
	    echo "fuzz ./$$d $$t ($$n)"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $$n ./$$d || exit 1; \
	  done; \
	done

# The engine against SQLite, the search indexes, and the node over HTTP
# against the engine in process; each prints its table and saves it under
# bench/. The router, replication and leases have targets of their own:
# shard-bench, repl-bench, lease-bench.
bench:
	@mkdir -p bench
	cd bench/sqlite && $(GO) run . | tee ../engine.txt
	$(GO) run ./bench/search -out bench/search.txt
	$(GO) run ./bench/node -o bench/node.txt

clean:
	rm -rf $(BIN)

# Opening a 100 000 × 128 @hnsw tenant served from its mapped file against
# the build before it (MAPPING_BEFORE, a revision: c6e2d99 copied every
# document to the heap as the tenant opened; 386af79 built every
# index as the tenant opened; a4003c6 wrote FNI3, each vector twice;
# 31e2593 served nothing from the file), side by side in one run, then
# 1 000 searches; and a tenant of 100 000 plain documents, its open and
# the first read of each index. The bench's source is built in a git
# worktree at that revision too. Writes bench/mapping.txt. Run it on a
# quiet machine (load average under 3).
MAPPING_BEFORE ?= a276298
MAPPING_FLAGS  ?=
.PHONY: mapping-bench
mapping-bench:
	@t=$$(mktemp -d); trap 'git worktree remove --force '$$t/before' >/dev/null 2>&1; rm -rf '$$t EXIT; \
	git worktree add --detach $$t/before $(MAPPING_BEFORE) >/dev/null && \
	mkdir -p $$t/before/bench/mapping && cp bench/mapping/main.go $$t/before/bench/mapping/ && \
	(cd $$t/before && $(GO) build -o $$t/mapping-before ./bench/mapping) && \
	$(GO) build -o $$t/mapping-after ./bench/mapping && \
	$$t/mapping-after -before $$t/mapping-before -after $$t/mapping-after -out bench/mapping.txt $(MAPPING_FLAGS)

# fenec, fenec-node and fenec-shard where go install puts them: $GOBIN,
# else $(go env GOPATH)/bin (put that directory on PATH).
.PHONY: install
install:
	$(GO) install ./cmd/...
	@d=$$($(GO) env GOBIN); echo "installed into $${d:-$$($(GO) env GOPATH)/bin}"

# A node and a router in one process, data under ./data; Ctrl-C stops it.
run: build
	$(BIN)/fenec dev --data ./data

# End-to-end tests: real processes (built without -race) on loopback.
.PHONY: e2e
e2e:
	$(GO) test -count=1 -timeout 10m ./tests/...

# Router cost as deployed (node, router and nginx each a process, driven
# by wrk), per-request system calls and the router's profile, the
# in-process rows, and a 100 000 × 128 move (as deployed, then in
# process); writes bench/shard.txt, bench/shard-profile.txt,
# bench/shard-move-profile.txt and (with perf) bench/shard-move-faults.txt,
# then the replication and lease benches.
# Installs Debian's nginx and wrk first when they are missing; the bench
# stops every process it starts. SHARD_BENCH_FLAGS are passed on, e.g.
# "-only deployed -tls=false -rounds 3" for the wrk rows alone, or
# "-only move -wrk none -tls=false -move-image /tmp/mv.img" for the move
# (the tenant loaded once, its image restored from the file after).
SHARD_BENCH_FLAGS ?=
.PHONY: shard-bench
shard-bench: bench-tools
	$(GO) run ./bench/shard -out bench/shard.txt -profile-out bench/shard-profile.txt $(SHARD_BENCH_FLAGS)
	$(MAKE) repl-bench lease-bench

# Debian's nginx and wrk, which the deployed benches drive and compare
# against, installed when missing.
.PHONY: bench-tools
bench-tools:
	@missing=""; for p in nginx wrk; do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; fi

# Every bench once at its smallest (bench/smoke.sh), its tables in a
# directory of its own, never bench/: what CI runs, so that a bench that
# stopped running is seen the day it breaks. Installs nginx and wrk like
# shard-bench.
.PHONY: bench-smoke
bench-smoke: bench-tools
	GO=$(GO) bench/smoke.sh

# A directory of 100 000 tenant records in an embedded etcd member against
# one of 10: placements a second, a router's start and memory, the lookup
# per request (in process, and a keyed read through a router over each,
# as deployed, driven by wrk), a change reaching a standby's copy and a
# region's mirror; writes bench/directory.txt.
.PHONY: directory-bench
directory-bench: bench-tools
	$(GO) run ./bench/directory -out bench/directory.txt

# What quotas cost: a tenant with no quota against one with every quota
# over HTTP, and a put through the node's quota hook in process; writes
# bench/quota.txt.
.PHONY: quota-bench
quota-bench:
	$(GO) run ./bench/quota -out bench/quota.txt

# A copy's cost under --sync always (acknowledged writes with and without
# one), replica lag, and a failover by hand of 20 tenants through a router;
# writes bench/repl.txt.
.PHONY: repl-bench
repl-bench:
	$(GO) run ./bench/repl -out bench/repl.txt

# Automatic failover under leases of 1 s and 5 s, three runs each: a node
# cut off from the router, its tenants' writes on their copies again, what
# was cut, lost or doubled; router and nodes each a process; writes
# bench/lease.txt.
.PHONY: lease-bench
lease-bench:
	$(GO) run ./bench/lease -leases 1,5 -runs 3 -out bench/lease.txt

# The alert rules: promtool checks them and runs their unit tests
# (deploy/prometheus/alerts_test.yml). Installs Debian's prometheus
# package first when promtool is missing.
.PHONY: rules
rules:
	@command -v promtool >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq prometheus >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq prometheus >/dev/null; fi; }
	promtool check rules deploy/prometheus/alerts.yml
	cd deploy/prometheus && promtool test rules alerts_test.yml

# The drill on the three-region compose deployment (deploy/compose.yaml): a
# node cut off the network and killed under keyed writers, region eu lost
# whole or cut off alive, and tenants moved between eu and us with the
# leading router killed and the source cut off part-way (the lost,
# partitioned and rehome cases, 25 ms each way between the regions), three
# runs of each case, each tenant's history checked with porcupine after each
# run (a history not linearizable fails it); prints the table and writes
# bench/drill.txt. Builds the binaries and images first (deploy/build.sh,
# offline).
# The images are tagged, and the drill's compose project named, after this
# checkout's directory, so that drills of two checkouts on one Docker host
# run their own images side by side.
DRILL_TAG ?= $(shell basename "$(CURDIR)" | tr -c 'a-z0-9\n' '-')
.PHONY: drill drill-short images
images:
	FENEC_TAG=$(DRILL_TAG) deploy/build.sh
drill: images
	FENEC_TAG=$(DRILL_TAG) $(GO) run ./bench/drill -project fenecdrill-$(DRILL_TAG) -runs 3 -out bench/drill.txt

# What CI runs: one run of the cut case, fewer tenants; fails if an
# acknowledged write was lost or a dead node's writer never wrote again.
drill-short: images
	FENEC_TAG=$(DRILL_TAG) $(GO) run ./bench/drill -project fenecdrill-$(DRILL_TAG) -cases cut -runs 1 -tenants 2 -after 8s -out "" -check

# What one tenant's heavy statements take from another tenant on the same
# node: the light tenant's keyed reads alone and beside heavy clients that
# hang up after a second (an in over 300 000 values, a pattern scan), with
# the node's CPU during and after; writes bench/neighbour.txt.
# NEIGHBOUR_BENCH_FLAGS are passed on, e.g. "-base 85e3ed2" to measure a
# node built from that revision beside this checkout's.
NEIGHBOUR_BENCH_FLAGS ?=
.PHONY: neighbour-bench
neighbour-bench:
	$(GO) run ./bench/neighbour -out bench/neighbour.txt $(NEIGHBOUR_BENCH_FLAGS)

# Every hostile client at once beside writers through a router under
# leases, for five minutes (tests/soak_test.go, TestSoakHostileClients in
# its long mode; make test runs it for seconds): the router's and nodes'
# memory peaks against their bounds, a light tenant's p99 alone and under
# attack, failovers, upstream errors, refusals by kind and the audit
# logs' sizes; writes bench/soak.txt.
.PHONY: soak
soak:
	FENEC_SOAK=long FENEC_SOAK_TABLE=$(CURDIR)/bench/soak.txt $(GO) test -count=1 -v -timeout 30m -run '^TestSoakHostileClients$$' ./tests
	@cat bench/soak.txt

# Per-region leasing with the global tier 40 ms away each way: a node's
# loss under writers with its region leased by the global tier and by
# itself, the write pause of a planned handoff each way, and forwarding
# through a region's router against a global-tier router beside it;
# writes bench/region.txt.
.PHONY: region-bench
region-bench:
	$(GO) run ./bench/region -runs 3 -out bench/region.txt

# Reads near the reader with the tenant's home 25 ms away each way: a
# reader in us through a --near router, for a tenant of eu with a read
# copy in us, reading stating nothing (the primary), with a staleness
# bound and after its own write (the copy), and the staleness the copy
# states under steady writes, every answer held to it; and what surviving
# a region costs a write: a writer beside eu writing in turns to a tenant
# whose voting copy is in eu (survive zone) and one whose copy is in us
# (survive region), both under --sync always; and (g), 10 000 write-then-
# read pairs from us, every answer held to what it claims, with the
# primary killed halfway and the tenant failed over; routers and nodes each a
# process, the wide-area link the bench's; beside the bounded read, the
# same read straight to the copy's node and through nginx in front of it
# (installed when missing, like shard-bench); writes bench/geo.txt.
# GEO_BENCH_FLAGS are passed on, e.g. "-delay 80ms" or "-small".
GEO_BENCH_FLAGS ?=
.PHONY: geo-bench
geo-bench: bench-tools
	$(GO) run ./bench/geo -out bench/geo.txt $(GEO_BENCH_FLAGS)

# A tenant rehomed between regions under writes, 25 ms each way between
# them: the longest gap between a steady writer's acknowledged writes, the
# move by following against the source frozen for its image's copy
# (--move-image), two deployments side by side (bench/rehome.txt).
.PHONY: rehome-bench
rehome-bench:
	$(GO) run ./bench/rehome -out bench/rehome.txt $(REHOME_BENCH_FLAGS)

# The fault-injection suite (tests/nemesis, docs/testing.md): real nodes
# and routers on loopback, a proxy on every link, clients at a steady
# rate, faults from a seeded schedule, every history checked. Every run
# prints its seed; make nemesis SCENARIO=pause SEED=42 DURATION=30s runs
# that one again. A run that finds an anomaly saves its history, a
# description and the processes' logs under tests/nemesis/results/.
# SCENARIO is a name, a comma-separated list, or all; SEED 0 is one from
# the clock; SEEDS runs that many seeds from SEED on.
SCENARIO ?= all
SEED     ?= 0
SEEDS    ?= 1
DURATION ?= 15s
NEMESIS_ARGS = -scenario $(SCENARIO) -seed $(SEED) -seeds $(SEEDS) -duration $(DURATION)
.PHONY: nemesis nemesis-ci nemesis-long
nemesis:
	$(GO) test -tags nemesis -count=1 -v -timeout 0 -run 'TestNemesis$$' ./tests/nemesis -args $(NEMESIS_ARGS)

# What CI runs: every scenario once for a short while, the seeds kept as
# regressions, the check that the suite sees two primaries when there
# are two, and the default build's lack of hooks (about 5 min on 2 cores,
# measured on a shared, loaded machine).
nemesis-ci:
	$(GO) test -tags nemesis -count=1 -v -timeout 15m ./tests/nemesis -args -scenario all -seeds 1 -duration 8s

# The long runs: 50 seeds of a minute each per scenario, the table
# written to bench/nemesis.txt. About 13 h on 2 cores for all of them
# (85 s a run: a minute of faults, the rest the deployment's start, the
# heal and the checks); split it by SCENARIO across machines.
nemesis-long:
	$(GO) test -tags nemesis -count=1 -v -timeout 0 -run 'TestNemesis$$' ./tests/nemesis -args -scenario $(SCENARIO) -seed 1 -seeds 50 -duration 60s -table ../../bench/nemesis.txt
