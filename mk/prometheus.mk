# Prometheus 2.42 from Debian (docs/prometheus.md): only the server binary is used; gangstorm starts
# its own instance on 127.0.0.1 (fakes/prom/server.py). Idempotent: skipped when /usr/bin/prometheus exists.
# The package's own service (and any exporter it pulls in) is stopped and disabled, under systemd
# and under sysvinit alike, so that nothing listens on :9090/:9100 behind our back.
PROM_SERVICES := prometheus prometheus-node-exporter

.PHONY: prometheus-deps
prometheus-deps:
	@if [ ! -x /usr/bin/prometheus ]; then \
	  echo "installing prometheus"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends prometheus; \
	  $$SUDO systemctl disable --now $(PROM_SERVICES) >/dev/null 2>&1 || true; \
	  for s in $(PROM_SERVICES); do \
	    [ -x /etc/init.d/$$s ] || continue; \
	    $$SUDO /etc/init.d/$$s stop >/dev/null 2>&1 || true; \
	    $$SUDO update-rc.d $$s disable >/dev/null 2>&1 || true; \
	  done; \
	fi
	@/usr/bin/prometheus --version 2>&1 | head -1

TEST_DEPS += prometheus-deps
