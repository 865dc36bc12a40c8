# Real Kubernetes on KWOK (docs/kube.md): kwok, kwokctl, etcd, etcdctl, kube-apiserver,
# kube-scheduler, kube-controller-manager built from Go modules pinned to released versions.
# The Volcano fragment reuses GANGSTORM_BIN_DIR for its own binaries.
GANGSTORM_BIN_DIR ?= $(HOME)/.cache/gangstorm/bin
export GANGSTORM_BIN_DIR
KUBE_VERSION ?= v1.36.1
KWOK_VERSION ?= v0.8.0
ETCD_VERSION ?= v3.6.16
K8S_BINS := kwok kwokctl etcd etcdctl kube-apiserver kube-scheduler kube-controller-manager

.PHONY: k8s-bins
# Fast no-op when every binary is present; the script itself re-checks each --version.
k8s-bins:
	@if [ -n "$(strip $(foreach b,$(K8S_BINS),$(if $(wildcard $(GANGSTORM_BIN_DIR)/$(b)),,$(b))))" ]; then \
	  KUBE_VERSION=$(KUBE_VERSION) KWOK_VERSION=$(KWOK_VERSION) ETCD_VERSION=$(ETCD_VERSION) \
	    tools/k8s/build-bins.sh; \
	else echo "k8s-bins: present in $(GANGSTORM_BIN_DIR) (tools/k8s/build-bins.sh to re-check versions)"; fi

TEST_DEPS += k8s-bins

# kube-scheduler's own benchmark (scheduler_perf) from the same pinned module, as a test binary;
# fakes/kube/schedperf.py runs its SchedulingBasic workloads (tools/k8s/scheduler-perf/).
.PHONY: scheduler-perf
scheduler-perf:
	@KUBE_VERSION=$(KUBE_VERSION) tools/k8s/build-scheduler-perf.sh
