# Volcano (scheduler + controller manager) built from the volcano.sh/volcano Go module, plus its CRDs,
# into the same binary cache as the Kubernetes binaries (mk/k8s.mk). Idempotent: a stamp per version.
VOLCANO_VERSION ?= v1.14.1
VOLCANO_APIS_VERSION ?= v1.14.0
GANGSTORM_BIN_DIR ?= $(HOME)/.cache/gangstorm/bin

.PHONY: volcano-bins
volcano-bins:
	@VOLCANO_VERSION=$(VOLCANO_VERSION) VOLCANO_APIS_VERSION=$(VOLCANO_APIS_VERSION) GANGSTORM_BIN_DIR=$(GANGSTORM_BIN_DIR) bash tools/volcano/build.sh

TEST_DEPS += volcano-bins
