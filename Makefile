# Usual targets. `make` builds; `make test` is the README's test command.
GO ?= go

.PHONY: build run test race vet fmt bench ci clean

build:
	$(GO) build -o bin/agentgate ./cmd/agentgate

run:
	$(GO) run ./cmd/agentgate serve

test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

ci:
	bash .ci/run

clean:
	rm -rf bin agentgate-data
