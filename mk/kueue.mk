# Kueue's manager (core + topology-aware controllers, the pod integration, its scheduler; no
# webhooks) built from the sigs.k8s.io/kueue Go module, plus that release's CRDs, into the same
# binary cache as the Kubernetes binaries (mk/k8s.mk). Idempotent: a stamp per version and main.go.
KUEUE_VERSION ?= v0.19.2
GANGSTORM_BIN_DIR ?= $(HOME)/.cache/gangstorm/bin

.PHONY: kueue-bins
kueue-bins:
	@KUEUE_VERSION=$(KUEUE_VERSION) GANGSTORM_BIN_DIR=$(GANGSTORM_BIN_DIR) bash tools/kueue/build.sh

TEST_DEPS += kueue-bins

# Kueue's own scalability benchmark, run here with the real Kueue (a benchmark, not a CI test: about
# 6 minutes on 2 cores plus the first build): tools/kueue/perf.sh, evidence under results/kueue/perf-baseline.
.PHONY: kueue-perf
kueue-perf: k8s-bins
	@KUEUE_VERSION=$(KUEUE_VERSION) GANGSTORM_BIN_DIR=$(GANGSTORM_BIN_DIR) bash tools/kueue/perf.sh
