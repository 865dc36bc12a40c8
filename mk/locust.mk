# Locust driver: headless Chromium for the web UI test, and the open-loop send-rate benchmark.
# Debian's chromium (no chromium-driver: the test speaks the DevTools protocol directly).

.PHONY: browser-deps locust-web locust-headless locust-bench
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing chromium"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends chromium; \
	fi

# Web UI on http://127.0.0.1:8089 (SCENARIO from the Makefile).
locust-web: $(STAMP)
	$(BIN)/gangstorm locust $(SCENARIO)

locust-headless: $(STAMP)
	$(BIN)/gangstorm locust $(SCENARIO) --headless

# Highest open-loop send rate with generator lateness p99.9 < 5 ms, 1 and 2 Locust processes.
locust-bench: $(STAMP)
	$(BIN)/python -m loadgen.bench.locust

TEST_DEPS += browser-deps
