# skillbus — the two commands a newcomer needs are `make run` and `make test`.

GO ?= go
SKILLS ?= testdata/skills
RUN_FLAGS ?=
BENCH_FLAGS ?=
CHAOS_FLAGS ?=

.PHONY: deadcode generate gofmt test-ui test-cluster test-all run test bench chaos build vet fuzz clean deploy-check eval

## run: start everything (embedded NATS, registry, router, workers) with the example skills.
## The binary runs itself rather than under `go run`, so that Ctrl-C ends it, and make, cleanly.
## More flags of `skillbus dev` in RUN_FLAGS, e.g. make run RUN_FLAGS="--port 14222 --workers 4"
run: build
	./bin/skillbus dev --skills $(SKILLS) $(RUN_FLAGS)

## cluster: a 3-node JetStream cluster on loopback (nats-server built from go.mod's version, no
## Docker) and the registry, a router and two workers as processes, at R3; Ctrl-C stops it all.
## See docs/operations.md, "Three nodes without Docker"
cluster: build bin/nats-server
	deploy/local/cluster.sh

## cluster-down: stop what `make cluster` started (from another terminal; the same CLUSTER_DIR)
CLUSTER_DIR ?= .cluster
cluster-down:
	@# Last started first, each waited for (up to 40 s) before the next: the services finish
	@# their in-flight work while the NATS servers they talk to are still up.
	@if [ -s $(CLUSTER_DIR)/pids ]; then \
	  ps=$$(tac $(CLUSTER_DIR)/pids); \
	  for p in $$ps; do \
	    kill -TERM $$p 2>/dev/null || continue; \
	    i=0; while kill -0 $$p 2>/dev/null && [ $$i -lt 200 ]; do sleep 0.2; i=$$((i+1)); done; \
	    kill -0 $$p 2>/dev/null && { echo "process $$p did not stop in 40 s; killing it"; kill -KILL $$p 2>/dev/null; }; \
	  done; \
	  echo "stopped $$(echo $$ps | wc -w) processes"; rm -f $(CLUSTER_DIR)/pids; \
	else echo "no cluster running (no $(CLUSTER_DIR)/pids)"; fi

bin/nats-server: go.mod
	$(GO) build -o bin/nats-server github.com/nats-io/nats-server/v2

## image: build the container image with the Dockerfile (IMAGE=ghcr.io/you/skillbus:tag to name it; push it with docker push)
IMAGE ?= skillbus:dev
DOCKER ?= docker
image:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make image: no $(DOCKER) here (set DOCKER=podman, or build where docker runs)"; exit 1; }
	$(DOCKER) build -t $(IMAGE) .

## test: every test of the module: unit, integration against embedded JetStream, end-to-end
## with the real binaries; README.md ("The two commands") says how long it takes on 2 cores.
## Each package is vetted (every analyzer of go vet) from the race build its tests compile
## anyway, rather than by a go vet that compiles every package once more without the race
## detector. The bench's smoke test, a throughput run, is behind the build tag bench: test-all runs it.
## -p 4 runs four packages at a time rather than one per core: the slowest ones mostly wait (on
## processes, AckWaits, servers starting) and use a tenth to two thirds of a core while they run.
## Within a package, go test runs as many parallel tests at once as there are cores; the packages
## whose tests mostly wait (pkg/worker, pkg/router, internal/cli: 8; e2e: 4) raise that in TestMain
## (natstest.WaitingTests), unless -parallel is given: a test waiting out a 20-second throttle period
## otherwise holds one of two places all along (pkg/worker alone: 87 s, now 25 s).
## The packages run in ./...'s order: naming the slowest first (pkg/worker, e2e, internal/cli and
## pkg/router together at the start) shortened the run a little but loaded two cores so that
## timing-sensitive tests failed (a throttle's rate; a worker killed while it held no jobs). A program
## built with -race sleeps a second as it exits (for goroutines still running to report a race): GORACE's atexit_sleep_ms=0 spares every test
## binary that second; the tests that start race-built programs give them the same (natstest.RaceEnv).
## The test binaries are linked without the symbol table and DWARF (-ldflags='-s -w'), which no test
## reads: linking pkg/router's took 4.8 s of CPU rather than 7.3 s, and every package's is linked
## again on a clean clone. Stack traces and race reports come from the runtime's own tables.
test: gofmt
	$(GO) mod download
	GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race -short -vet=all -ldflags='-s -w' -p 4 -timeout 15m ./...

## test-all: what CI runs besides the browser tests: test, then the bench's smoke test
## (build tag bench), the 3-node cluster test and the check of every Kubernetes overlay
## (each of the last two also a target of its own)
test-all: test
	$(GO) test -race -tags bench -run '^TestBenchRuns$$' -timeout 10m ./internal/bench/
	$(MAKE) test-cluster
	$(MAKE) deploy-check

## deploy-check: `kubectl kustomize` every overlay of deploy/ (kustomize's Go packages) and check each object strictly against the Kubernetes API types
deploy-check:
	cd deploy/check && $(GO) vet ./... && $(GO) test ./... && $(GO) run . ../overlays/*

## test-cluster: the 3-node JetStream cluster test: three nats-server processes, the jobs
## stream's leader SIGKILLed mid-run and restarted (under a minute). Part of make test-all
## (and so of CI), run after the other tests rather than beside them, because it times a
## fail-over; behind the build tag `cluster` so that `make test` stays quick
test-cluster:
	$(GO) test -race -tags cluster -run '^TestCluster' -timeout 10m ./internal/cli/ ./pkg/bus/

## test-ui: the web console's browser tests in a real headless Chromium (chromedp), installing
## Chromium from the system's packages when it is missing; screenshots of the pages go to UI_OUT
UI_OUT ?= $(CURDIR)/.test-output/console
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-ui:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || { \
	  echo "test-ui: installing chromium (apt-get)"; \
	  $(SUDO) apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	UI_OUT=$(UI_OUT) $(GO) test -race -tags ui -run '^TestBrowser' -count=1 -timeout 5m ./pkg/console/
	@echo "screenshots: $(UI_OUT)"

## bench: throughput and latency against bare JetStream doing the same persisted hops
bench:
	$(GO) run ./cmd/skillbus bench $(BENCH_FLAGS)

## eval: routing quality, router beside Okapi BM25 and BM25+stemming, on every labelled set:
## the project's own (testdata/routing, its held-out half), the phrase-trigger catalog and the eight
## written blind to the router (testdata/routing/blind), and
## each public data set of testdata/routing/public in its tuning and held-out halves (and
## heldout-train.jsonl, a training split nothing was tuned on, where a set has one), with the
## share of its offtopic-*.jsonl requests (another domain's, or CLINC150's out-of-scope ones) rejected;
## for the public sets, also how many requests only the router or only BM25+stemming gets right (sign test)
EVAL_BIN := $(CURDIR)/.test-output/skillbus-eval
eval:
	@mkdir -p $(dir $(EVAL_BIN)) && $(GO) build -o $(EVAL_BIN) ./cmd/skillbus
	@echo "== testdata/routing heldout"; $(EVAL_BIN) route eval --skills testdata/routing/skills --cases testdata/routing/heldout.jsonl --no-examples | sed -n '3,9p'
	@echo "== testdata/routing/phrasestyle"; $(EVAL_BIN) route eval --skills testdata/routing/phrasestyle/skills --cases testdata/routing/phrasestyle/cases.jsonl | sed -n '3,9p'
	@for set in testdata/routing/blind/*/; do \
	  echo "== $$set"; $(EVAL_BIN) route eval --skills $${set}skills --cases $${set}cases.jsonl --no-examples | sed -n '3,9p'; \
	done
	@for set in testdata/routing/public/*/; do [ -d $${set}skills ] || continue; for half in tune heldout; do \
	  echo "== $$set $$half"; $(EVAL_BIN) route eval --skills $${set}skills --cases $${set}$$half.jsonl --no-examples | sed -n '3,9p;/^request by request/,/^recall@5 /p'; \
	  echo "   off-topic: $${set}offtopic-$$half.jsonl"; $(EVAL_BIN) route eval --skills $${set}skills --cases $${set}offtopic-$$half.jsonl --no-examples | grep 'off-topic rejected'; \
	done; \
	if [ -f $${set}heldout-train.jsonl ]; then \
	  echo "== $$set heldout-train"; $(EVAL_BIN) route eval --skills $${set}skills --cases $${set}heldout-train.jsonl --no-examples | sed -n '3,9p;/^request by request/,/^recall@5 /p'; \
	fi; done

## chaos: 10,000 side-effecting triggers through a real fleet while every kind of process is killed
## and, once, nats-server's store (a tmpfs it mounts; as root) fills up and is freed (-disk-full=false
## leaves that out). Not part of test; minutes long. Tune with CHAOS_FLAGS, e.g. CHAOS_FLAGS="-triggers 500 -seed 7"
chaos:
	$(GO) run ./internal/chaos/cmd/chaos $(CHAOS_FLAGS)

## build: the four binaries into ./bin
build:
	$(GO) build -o bin/ ./cmd/...

## generate: rewrite the generated code after changing what it is made from (a field of a wire
## type: the JSON encoders and decoders internal/cmd/jsongen writes); a test fails while a
## checked-in generated file is stale
generate:
	$(GO) generate ./...

## deadcode: fail on a function no binary reaches (deadcode ./..., without tests) unless
## internal/archtest/deadcode-allowed.txt names it: test support or public Go API, see
## docs/architecture.md. Downloads golang.org/x/tools' deadcode at the version below
DEADCODE ?= $(GO) run golang.org/x/tools/cmd/deadcode@v0.52.0
deadcode:
	@$(DEADCODE) -f '{{range .Funcs}}{{$$.Path}} {{.Name}}{{"\n"}}{{end}}' ./... > .deadcode.out
	@awk 'NR==FNR { if ($$0 !~ /^#/ && NF == 2) ok[$$0] = 1; if ($$2 == "*") pkg[$$1] = 1; next } \
	  !(($$0 in ok) || ($$1 in pkg)) { print "unreachable, not in internal/archtest/deadcode-allowed.txt: " $$0; bad = 1 } \
	  END { exit bad }' internal/archtest/deadcode-allowed.txt .deadcode.out; rc=$$?; rm -f .deadcode.out; exit $$rc

## vet: go vet and gofmt on their own (make test vets as it compiles)
vet: gofmt
	$(GO) vet ./...

gofmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin .skillbus .cluster
