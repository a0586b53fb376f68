//go:build bench

package perf

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"
)

// coschedulingBinary is scheduler-plugins' kube-scheduler at its last
// release, v0.34.7, which `make bench-tools` builds in its own module: it
// is built on Kubernetes 1.34 and cannot be linked into a 1.37 scheduler,
// so it runs as a process of its own against the harness's API server.
const coschedulingBinary = "scheduler-plugins"

// coschedulingConfig is its KubeSchedulerConfiguration. The harness's own
// scheduler runs config/elsewhere.yaml in those workloads, a profile no pod
// names, so that every pod is this process's.
var coschedulingConfig = inPerfDir("config/coscheduling.yaml")

// startCoscheduling runs scheduler-plugins' scheduler for the workload and,
// when it ends, reports the figures of its /metrics that the harness
// reports of its own scheduler, under the same names.
func startCoscheduling(tCtx ktesting.TContext) error {
	collected, err := collectedMetrics(tCtx.TB().Name())
	if err != nil {
		return err
	}
	_, err = startScheduler(tCtx, coschedulingBinary, coschedulingConfig, nil, collected)
	return err
}

// startScheduler runs a scheduler binary of bin/ as a process of its own
// for the workload, with the configuration at configPath given the
// harness's API server; when the workload ends, it reports the collected
// histograms of its /metrics as the harness reports its own scheduler's.
// It returns the scheduler's endpoint, on loopback.
func startScheduler(tCtx ktesting.TContext, name, configPath string, args []string, collected map[string][]labelFilter) (string, error) {
	binary, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("finding %s (make bench-tools and make build build it into bin/): %w", name, err)
	}
	dir := tCtx.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(tCtx.RESTConfig(), kubeconfig); err != nil {
		return "", err
	}
	config, err := schedulerConfiguration(configPath, kubeconfig)
	if err != nil {
		return "", err
	}
	written := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(written, config, 0o600); err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return "", err
	}
	cmd := exec.Command(binary, append([]string{
		"--config=" + written,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		// Read by the harness only, on loopback.
		"--authorization-always-allow-paths=/healthz,/metrics,/debug/pprof/*",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=1",
	}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return "", fmt.Errorf("starting %s: %w", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	endpoint := "https://127.0.0.1:" + strconv.Itoa(port)
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		log.Close()
	}
	if err := waitHealthy(tCtx, endpoint, exited); err != nil {
		stop()
		return "", fmt.Errorf("%s did not become healthy (its log: %s): %w", name, log.Name(), err)
	}
	cpuAtStart, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		stop()
		return "", err
	}
	tCtx.Cleanup(func() {
		defer stop()
		if tCtx.TB().Failed() {
			tCtx.Logf("the end of %s's log:\n%s", name, tail(log.Name(), 40))
		}
		if b, ok := tCtx.TB().(*testing.B); ok {
			// The scheduler's CPU over the workload, from healthy to its
			// end, as the simulator's bound_pods counts the pods it bound.
			if cpu, err := cpuSeconds(cmd.Process.Pid); err != nil {
				tCtx.Errorf("reading %s's CPU time: %v", name, err)
			} else {
				b.ReportMetric(cpu-cpuAtStart, "scheduler_cpu_s")
			}
			if err := reportSchedulerMetrics(tCtx, b, endpoint, collected); err != nil {
				tCtx.Errorf("reading %s's metrics: %v", name, err)
			}
		}
	})
	return endpoint, nil
}

// tail returns the last lines of a file.
func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// schedulerConfiguration is the KubeSchedulerConfiguration at path with
// the harness's API server, the client rate the harness gives its own
// scheduler, and no leader election.
func schedulerConfiguration(path, kubeconfig string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	config := map[string]any{}
	if err := yaml.Unmarshal(data, &config); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	config["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 5000, "burst": 5000}
	config["leaderElection"] = map[string]any{"leaderElect": false}
	return yaml.Marshal(config)
}

// writeKubeconfig writes the harness's client configuration for another
// process.
func writeKubeconfig(config *rest.Config, path string) error {
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["harness"] = &clientcmdapi.Cluster{
		Server: config.Host, TLSServerName: config.ServerName, InsecureSkipTLSVerify: config.Insecure,
		CertificateAuthority: config.CAFile, CertificateAuthorityData: config.CAData,
	}
	kubeconfig.AuthInfos["harness"] = &clientcmdapi.AuthInfo{
		Token: config.BearerToken, TokenFile: config.BearerTokenFile,
		ClientCertificate: config.CertFile, ClientCertificateData: config.CertData,
		ClientKey: config.KeyFile, ClientKeyData: config.KeyData,
	}
	kubeconfig.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: "harness"}
	kubeconfig.CurrentContext = "harness"
	return clientcmd.WriteToFile(*kubeconfig, path)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// loopbackClient reads a scheduler's self-signed endpoints on loopback.
var loopbackClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // its own certificate, on 127.0.0.1
}

func waitHealthy(ctx context.Context, endpoint string, exited <-chan error) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("exited: %v", err)
		default:
		}
		resp, err := loopbackClient.Get(endpoint + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// reportSchedulerMetrics reports, from a scheduler's /metrics, the
// histograms the workload's metricsCollectorConfig names, as the harness
// reports its own scheduler's: Perc50 to Perc99 and Average, times 1000,
// "_seconds" read as "_ms". Both cover the whole workload, each run in a
// process of its own.
func reportSchedulerMetrics(ctx context.Context, b *testing.B, endpoint string, collected map[string][]labelFilter) error {
	gathered, err := scrape(ctx, endpoint)
	if err != nil {
		return err
	}
	for name, filters := range collected {
		for _, labels := range labelCombinations(filters) {
			vec, err := gathered.GetHistogramVec(name, labels)
			if err != nil || vec.GetAggregatedSampleCount() == 0 {
				continue
			}
			if err := vec.Validate(); err != nil {
				return fmt.Errorf("%s%v: %w", name, labels, err)
			}
			unit := strings.ReplaceAll(name, "_seconds", "_ms")
			for key, q := range map[string]float64{"Perc50": 0.5, "Perc90": 0.9, "Perc95": 0.95, "Perc99": 0.99} {
				b.ReportMetric(vec.Quantile(q)*1000, unit+"/"+key)
			}
			b.ReportMetric(vec.Average()*1000, unit+"/Average")
		}
	}
	return nil
}

// labelFilter is one label of a metricsCollectorConfig entry.
type labelFilter struct {
	Label  string   `json:"label"`
	Values []string `json:"values"`
}

// collectedMetrics reads, from the workloads' file, the histograms the
// benchmark's test case collects.
func collectedMetrics(benchmark string) (map[string][]labelFilter, error) {
	parts := strings.Split(benchmark, "/")
	if len(parts) < 2 {
		return nil, fmt.Errorf("benchmark %q names no test case", benchmark)
	}
	data, err := os.ReadFile(workloadsFile)
	if err != nil {
		return nil, err
	}
	var cases []struct {
		Name    string `json:"name"`
		Metrics struct {
			Metrics map[string][]labelFilter `json:"metrics"`
		} `json:"metricsCollectorConfig"`
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", workloadsFile, err)
	}
	for _, c := range cases {
		if c.Name == parts[1] {
			return c.Metrics.Metrics, nil
		}
	}
	return nil, fmt.Errorf("%s has no test case %s", workloadsFile, parts[1])
}

// labelCombinations lists every combination of one value per label.
func labelCombinations(filters []labelFilter) []map[string]string {
	combinations := []map[string]string{{}}
	for _, filter := range filters {
		var next []map[string]string
		for _, value := range filter.Values {
			for _, c := range combinations {
				combined := map[string]string{filter.Label: value}
				for k, v := range c {
					combined[k] = v
				}
				next = append(next, combined)
			}
		}
		combinations = next
	}
	return combinations
}

// scrape reads a scheduler's /metrics.
func scrape(ctx context.Context, endpoint string) (*testutil.GatheredMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return testutil.GatherMetrics(textGatherer(families))
}

// textGatherer serves families parsed from another process's /metrics.
type textGatherer map[string]*dto.MetricFamily

func (g textGatherer) Gather() ([]*dto.MetricFamily, error) {
	if len(g) == 0 {
		return nil, errors.New("no metrics")
	}
	families := make([]*dto.MetricFamily, 0, len(g))
	for _, f := range g {
		families = append(families, f)
	}
	return families, nil
}
