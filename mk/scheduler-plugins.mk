# scheduler-plugins (the coscheduling scheduler): its kube-scheduler build (sp-scheduler) and controller
# (sp-controller) from the sigs.k8s.io/scheduler-plugins Go module, plus its CRDs, into the same binary
# cache as the Kubernetes binaries (mk/k8s.mk). Idempotent: a stamp per binary and release.
# SP_KUBE_VERSION: v0.34.7's own go.mod pins Kubernetes v1.34.7, whose k8s.io/csi-translation-lib
# v0.34.7 the Go module proxy refuses (403 "not available"), so the plugins are built against v1.34.1.
SCHEDULER_PLUGINS_VERSION ?= v0.34.7
SP_KUBE_VERSION ?= v1.34.1
GANGSTORM_BIN_DIR ?= $(HOME)/.cache/gangstorm/bin

.PHONY: sp-bins
sp-bins:
	@SCHEDULER_PLUGINS_VERSION=$(SCHEDULER_PLUGINS_VERSION) SP_KUBE_VERSION=$(SP_KUBE_VERSION) \
	  GANGSTORM_BIN_DIR=$(GANGSTORM_BIN_DIR) bash tools/scheduler-plugins/build.sh

TEST_DEPS += sp-bins
