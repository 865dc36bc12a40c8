# Kueue's manager (core + topology-aware controllers, the pod integration, its scheduler; no
# webhooks) built from the sigs.k8s.io/kueue Go module, plus that release's CRDs, into the same
# binary cache as the Kubernetes binaries (mk/k8s.mk). Idempotent: a stamp per version and main.go.
KUEUE_VERSION ?= v0.19.2
GANGSTORM_BIN_DIR ?= $(HOME)/.cache/gangstorm/bin

.PHONY: kueue-bins
kueue-bins:
	@KUEUE_VERSION=$(KUEUE_VERSION) GANGSTORM_BIN_DIR=$(GANGSTORM_BIN_DIR) bash tools/kueue/build.sh

TEST_DEPS += kueue-bins
