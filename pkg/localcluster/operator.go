package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/muster-dev/muster/manifests"
	"github.com/muster-dev/muster/pkg/certs"
)

// Operator is an operator the cluster runs as a program of its own, as a
// user would run it next to muster: `make tools` builds it into binDir,
// with its CRDs from its own module in binDir/crds/<name>.
type Operator struct {
	// Name is the operator's binary and the directory of its CRDs.
	Name string
	// Args are its flags; KubeconfigFlag, with an admin's kubeconfig, is
	// added.
	Args []string
	// KubeconfigFlag is the operator's flag for a kubeconfig;
	// "--kubeconfig" when empty.
	KubeconfigFlag string
	// Env is added to the environment it inherits.
	Env []string
	// Wrapper, when set, runs first and execs the operator in place
	// (Process.Wrapper).
	Wrapper []string
	// Health is a URL that answers 200 once it serves, or empty.
	Health string
	// SetUp, when set, tells that the operator has finished what it does
	// after Health first answers 200, such as setting its controllers up;
	// StartOperator waits for both.
	SetUp func(context.Context) bool
	// CRDs, when set, names the files of binDir/crds/<name> to install;
	// every one when empty.
	CRDs []string
	// Webhook, when set, registers the operator's webhooks
	// (binDir/webhooks/<name>.yaml) at a loopback URL, as its users
	// register them at its Service.
	Webhook *OperatorWebhook
}

// OperatorWebhook is where an operator serves its webhooks.
type OperatorWebhook struct {
	// ConfigurationName, when set, is the name the operator knows its
	// webhook configuration by, for a rotator that patches it.
	ConfigurationName string
	// URL is the operator's webhook server, such as https://127.0.0.1:9443.
	URL string
	// CABundle verifies the operator's serving certificate.
	CABundle []byte
	// NamespaceSelectors, by webhook name, keep those webhooks off some
	// namespaces, as the operator's own kustomization patches them.
	NamespaceSelectors map[string]*metav1.LabelSelector
}

// StartOperator installs the operator's CRDs, waits until they are
// served, and starts it; Down stops it with the rest of the cluster.
func (c *Cluster) StartOperator(ctx context.Context, binDir string, op Operator) error {
	if err := c.installCRDs(ctx, filepath.Join(binDir, "crds", op.Name), op.CRDs); err != nil {
		return err
	}
	if op.Webhook != nil {
		if err := c.registerOperatorWebhooks(ctx, op.Name, filepath.Join(binDir, "webhooks", op.Name+".yaml"), op.Webhook); err != nil {
			return err
		}
	}
	flag := op.KubeconfigFlag
	if flag == "" {
		flag = "--kubeconfig"
	}
	args := append([]string{flag + "=" + c.Kubeconfig}, op.Args...)
	p, err := startProcess(op.Name, filepath.Join(binDir, op.Name), args, op.Env, op.Wrapper, filepath.Join(c.Dir, "logs"), c.Detached)
	if err != nil {
		return err
	}
	p.Health = op.Health
	c.Processes = append(c.Processes, p)
	if err := c.save(); err != nil {
		return err
	}
	if op.Health == "" {
		return nil
	}
	return waitFor(ctx, p, op.Health, func(ctx context.Context) bool {
		return healthy(ctx, op.Health) && (op.SetUp == nil || op.SetUp(ctx))
	})
}

// installCRDs creates the CRDs of the named files in dir, or every one
// there, and waits until each is established.
func (c *Cluster) installCRDs(ctx context.Context, dir string, files []string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("no CRDs in %s (make tools copies them there): %v", dir, err)
	}
	if len(files) > 0 {
		paths = slices.DeleteFunc(paths, func(path string) bool { return !slices.Contains(files, filepath.Base(path)) })
	}
	config, err := c.RESTConfig()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
			stored, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range stored.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	return nil
}

// registerOperatorWebhooks creates the operator's webhook configurations,
// mutating and validating, with each webhook pointed at the loopback URL
// plus its path. A configuration is named as the operator knows it, or
// else gets the operator's name as a prefix, as its users' kustomizations
// give it: the operators' manifests share the same generic names.
func (c *Cluster) registerOperatorWebhooks(ctx context.Context, operator, path string, webhook *OperatorWebhook) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the operator's webhooks (make tools copies them there): %w", err)
	}
	configs, err := manifests.Objects(data)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	restConfig, err := c.RESTConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	registrations := client.AdmissionregistrationV1()
	for _, config := range configs {
		for _, clientConfig := range certs.ClientConfigs(config) {
			pointAt(clientConfig, webhook.URL)
			clientConfig.CABundle = webhook.CABundle
		}
		config.SetName(operator + "-" + config.GetName())
		if webhook.ConfigurationName != "" {
			config.SetName(webhook.ConfigurationName)
		}
		switch config := config.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range config.Webhooks {
				if selector, ok := webhook.NamespaceSelectors[config.Webhooks[i].Name]; ok {
					config.Webhooks[i].NamespaceSelector = selector
				}
			}
			_, err = registrations.MutatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{})
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range config.Webhooks {
				if selector, ok := webhook.NamespaceSelectors[config.Webhooks[i].Name]; ok {
					config.Webhooks[i].NamespaceSelector = selector
				}
			}
			_, err = registrations.ValidatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("%s is not a webhook configuration", config.GetName())
		}
		if err != nil {
			return fmt.Errorf("registering the webhooks of %s: %w", config.GetName(), err)
		}
	}
	return nil
}

// createNamespace creates a namespace an operator expects to exist.
func (c *Cluster) createNamespace(ctx context.Context, name string) (kubernetes.Interface, error) {
	client, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	// Left by an earlier start that failed after it: starting again reuses it.
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return client, nil
}
