# kfsniff: `make run` analyses a bundled capture, `make test` runs every test.
# Everything Go needs is fetched by the go command itself.

GO        ?= go
BIN       ?= kfsniff
CAPTURE   ?= fixtures/pcaps/scenarios/observer-fetch-loop.pcap
FUZZTIME  ?= 10s
FUZZFLAGS ?=
BENCHTIME ?= 1s
E2ETIME   ?= 2s
E2ECOUNT  ?= 3
JUNIT     ?=
OUTAGE    ?= 3m
export CGO_ENABLED ?= 0

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build ./kfsniff (static, CGO_ENABLED=0)
	$(GO) build -trimpath -o $(BIN) ./cmd/kfsniff

.PHONY: run
run: build ## analyse a bundled capture (CAPTURE=...) and print the report
	./$(BIN) -r $(CAPTURE)

.PHONY: test
test: ## vet, build and run every test (what CI runs)
	$(GO) vet ./...
	$(GO) build ./...
	$(GO) test -count=1 -timeout 12m ./...
	$(GO) run ./cmd/kfsniff check $(if $(JUNIT),--junit $(JUNIT)) fixtures/pcaps

.PHONY: test-outage
test-outage: ## live capture shipping under load through a 3-minute sink outage (root): no record lost (OUTAGE=3m)
	$(GO) test -count=1 -timeout 20m -run '^TestLiveExportSpoolOutage$$' -v ./cmd/kfsniff -outage $(OUTAGE)

.PHONY: fixtures
fixtures: ## regenerate the scripted fixtures and re-record the kfake/kgo captures
	$(GO) run ./fixtures/fixturegen -o fixtures/pcaps
	$(GO) run ./fixtures/record/cmd/recordgen -o fixtures/pcaps
	$(GO) run ./fixtures/record/cmd/recordgen -o fixtures/pcaps slow-consumer-kgo-kfake

.PHONY: fixtures-librdkafka
fixtures-librdkafka: ## re-record the librdkafka fixtures of issue 30 (root; installs python3-confluent-kafka; in a network namespace of their own; ~1 min)
	fixtures/clients/record-librdkafka.sh

.PHONY: fixtures-kafka
fixtures-kafka: ## re-record the real Apache Kafka scenarios (root, Java 17, Maven; ~18 min) and check them (SCENARIOS=...)
	fixtures/kafka/record.sh $(SCENARIOS)

.PHONY: eval-heldout
eval-heldout: ## recall and precision on the held-out recordings (fixtures/heldout/manifest.tsv), whole and from 30 %
	nice -n 10 $(GO) run ./fixtures/heldout/eval -manifest fixtures/heldout/manifest.tsv

.PHONY: bench
bench: ## run the Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

.PHONY: bench-e2e
bench-e2e: ## end to end on generated and real-client captures: Go benchmark (ratio to the floor), then bench/e2e.sh (binary against the floor and tshark, peak RSS, issue 14 targets)
	$(GO) test -run '^$$' -bench E2E -benchmem -benchtime $(E2ETIME) -count $(E2ECOUNT) -timeout 60m ./bench
	bench/e2e.sh

.PHONY: bench-tshark
bench-tshark: ## kfsniff against tshark on generated captures (bench/compare-tshark.sh; installs tshark)
	bench/compare-tshark.sh

.PHONY: bench-live
bench-live: ## live capacity: tcpreplay of real captures onto a veth at rising rates, kfsniff (plain, UI, metrics, export) beside tcpdump (bench/live.sh; root; installs tcpreplay)
	bench/live.sh

.PHONY: bench-growth
bench-growth: ## time and peak RSS for 1, 4, 16 GB streamed through -r - and for 10k, 100k, 1M connections (bench/growth.sh)
	bench/growth.sh

.PHONY: soak
soak: ## live capture of real kgo clients for DURATION (default 1h) with the UI, metrics and export on; RSS, heap, goroutines, tables every 10 s (bench/soak.sh; root)
	bench/soak.sh $(if $(DURATION),-d $(DURATION))

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (FUZZFLAGS="-parallel 1" for one worker); fails at the end if any did
	@failed=""; \
	for pd in $$($(GO) list -f '{{.ImportPath}}={{.Dir}}' ./...); do \
	  pkg=$${pd%%=*}; dir=$${pd#*=}; \
	  for t in $$(cat $$dir/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg || failed="$$failed $$pkg.$$t"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

.PHONY: lint
lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
