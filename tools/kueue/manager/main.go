// Command kueue-manager runs Kueue's admission machinery without its webhooks or certificate
// management, the way Kueue's own performance test runs it (test/performance/scheduler), plus the
// one job integration gangstorm needs: plain pods in pod groups.
//
// It is composed only of Kueue's packages, at the version tools/kueue/build.sh pins: the core
// controllers (ClusterQueue, LocalQueue, Cohort, ResourceFlavor, Workload), the topology-aware
// scheduling controllers (Topology, the topology ungater, node and non-TAS usage tracking), the pod
// integration's reconciler and Kueue's scheduler. Its configuration is Kueue's own Configuration
// file, read and defaulted by Kueue's config loader, so every setting not given keeps Kueue's
// default (e.g. waitForPodsReady on, 30 minutes).
//
// What is left out, and why:
//   - webhooks: they need serving certificates and a Service the apiserver can reach; the pod
//     webhook's mutation (the kueue.x-k8s.io/managed label, the admission and topology scheduling
//     gates, the finalizer) is written by the client instead (fakes/kueue/pods.py);
//   - internal certificate management and the secure metrics endpoint: metrics are served over
//     plain HTTP on the address given (127.0.0.1 only, like every gangstorm component);
//   - leader election, MultiKueue, provisioning requests, the visibility server, other integrations.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuealpha "sigs.k8s.io/kueue/apis/kueue/v1alpha1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/controller/jobs/pod"
	"sigs.k8s.io/kueue/pkg/controller/tas"
	tasindexer "sigs.k8s.io/kueue/pkg/controller/tas/indexer"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/waitforpodsready"
	"sigs.k8s.io/kueue/pkg/version"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	utilruntime.Must(kueuealpha.AddToScheme(scheme))
	utilruntime.Must(configapi.AddToScheme(scheme))
}

func main() {
	configFile := flag.String("config", "", "Kueue Configuration file (config.kueue.x-k8s.io/v1beta2); empty: Kueue's defaults")
	metricsAddr := flag.String("metrics-bind-address", "0", "host:port for plain-HTTP /metrics; 0 turns it off")
	probeAddr := flag.String("health-probe-bind-address", "0", "host:port for /healthz and /readyz; 0 turns it off")
	featureGates := flag.String("feature-gates", "", "Kueue feature gates, k=v,...")
	showVersion := flag.Bool("version", false, "print the Kueue version and exit")
	logOpts := zap.Options{Development: false, TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Printf("kueue-manager (Kueue %s)\n", version.GitVersion)
		return
	}
	log := zap.New(zap.UseFlagOptions(&logOpts))
	ctrl.SetLogger(log)
	if err := run(*configFile, *metricsAddr, *probeAddr, *featureGates); err != nil {
		log.Error(err, "kueue-manager failed")
		os.Exit(1)
	}
}

func run(configFile, metricsAddr, probeAddr, featureGates string) error {
	options, cfg, err := config.Load(scheme, configFile)
	if err != nil {
		return fmt.Errorf("loading the configuration: %w", err)
	}
	if err := config.LoadAndValidateFeatureGates(featureGates, cfg.FeatureGates).ToAggregate(); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	options.Metrics = metricsserver.Options{BindAddress: metricsAddr}
	options.HealthProbeBindAddress = probeAddr
	options.LeaderElection = false
	if metricsAddr != "0" {
		metrics.Register()
	}

	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	kubeConfig.UserAgent = "kueue-manager/" + version.GitVersion
	if *cfg.ClientConnection.QPS >= 0 {
		kubeConfig.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(*cfg.ClientConnection.QPS, int(*cfg.ClientConnection.Burst))
	}
	mgr, err := ctrl.NewManager(kubeConfig, options)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), ctrl.Log))
	defer cancel()
	go func() {
		done := make(chan os.Signal, 2)
		signal.Notify(done, syscall.SIGINT, syscall.SIGTERM)
		<-done
		cancel()
	}()

	blockForPodsReady := waitforpodsready.Enabled(cfg.WaitForPodsReady) && cfg.WaitForPodsReady.BlockAdmission != nil &&
		*cfg.WaitForPodsReady.BlockAdmission
	requeueAt := configapi.EvictionTimestamp
	if cfg.WaitForPodsReady != nil && cfg.WaitForPodsReady.RequeuingStrategy != nil && cfg.WaitForPodsReady.RequeuingStrategy.Timestamp != nil {
		requeueAt = *cfg.WaitForPodsReady.RequeuingStrategy.Timestamp
	}
	cCache := schdcache.New(mgr.GetClient(), schdcache.WithPodsReadyTracking(blockForPodsReady),
		schdcache.WithFairSharing(fairsharing.Enabled(cfg.FairSharing)), schdcache.WithAdmissionFairSharing(cfg.AdmissionFairSharing))
	requeuer := qcache.NewRequeuer()
	if err := mgr.Add(requeuer); err != nil {
		return fmt.Errorf("requeuer: %w", err)
	}
	expectations := preemptexpectations.New()
	queues := qcache.NewManager(mgr.GetClient(), cCache, requeuer, qcache.WithPodsReadyRequeuingTimestamp(requeueAt),
		qcache.WithAdmissionFairSharing(cfg.AdmissionFairSharing), qcache.WithPreemptionExpectations(expectations))

	frameworks := jobframework.WithEnabledFrameworks([]string{pod.FrameworkName})
	if err := indexer.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexes: %w", err)
	}
	tasOn := features.Enabled(features.TopologyAwareScheduling)
	if tasOn {
		if err := tasindexer.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			return fmt.Errorf("TAS indexes: %w", err)
		}
	}
	if err := jobframework.SetupIndexes(ctx, mgr.GetFieldIndexer(), frameworks); err != nil {
		return fmt.Errorf("pod integration indexes: %w", err)
	}

	if name, err := core.SetupControllers(mgr, queues, cCache, &cfg, core.SetupControllersOpts{PreemptionExpectations: expectations}); err != nil {
		return fmt.Errorf("core controller %s: %w", name, err)
	}
	if tasOn {
		if name, err := tas.SetupControllers(mgr, queues, cCache, &cfg, nil); err != nil {
			return fmt.Errorf("TAS controller %s: %w", name, err)
		}
	}
	selector, err := v1.LabelSelectorAsSelector(cfg.ManagedJobsNamespaceSelector)
	if err != nil {
		return fmt.Errorf("managedJobsNamespaceSelector: %w", err)
	}
	reconciler, err := pod.NewReconciler(ctx, mgr.GetClient(), mgr.GetFieldIndexer(),
		mgr.GetEventRecorder(fmt.Sprintf("%s-%s-controller", pod.FrameworkName, constants.KueueName)),
		frameworks,
		jobframework.WithManageJobsWithoutQueueName(cfg.ManageJobsWithoutQueueName),
		jobframework.WithManagedJobsNamespaceSelector(selector),
		jobframework.WithWaitForPodsReady(cfg.WaitForPodsReady),
		jobframework.WithManagerName(constants.KueueName),
		jobframework.WithCache(cCache),
		jobframework.WithQueues(queues),
		jobframework.WithObjectRetentionPolicies(cfg.ObjectRetentionPolicies))
	if err != nil {
		return fmt.Errorf("pod reconciler: %w", err)
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pod reconciler: %w", err)
	}

	sched := scheduler.New(queues, cCache, mgr.GetClient(), mgr.GetEventRecorder(constants.AdmissionName),
		scheduler.WithPodsReadyRequeuingTimestamp(requeueAt),
		scheduler.WithFairSharing(cfg.FairSharing),
		scheduler.WithAdmissionFairSharing(cfg.AdmissionFairSharing),
		scheduler.WithPreemptionExpectations(expectations))
	if err := mgr.Add(sched); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if probeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return err
		}
	}
	go queues.CleanUpOnContext(ctx)
	go cCache.CleanUpOnContext(ctx)
	ctrl.Log.Info("starting", "kueue", version.GitVersion, "tas", tasOn, "waitForPodsReady", waitforpodsready.Enabled(cfg.WaitForPodsReady))
	return mgr.Start(ctx)
}
