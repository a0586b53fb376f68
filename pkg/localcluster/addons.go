package localcluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/muster-dev/muster/manifests"
)

//go:embed realnode/coredns.yaml
var coreDNSManifest string

// deploymentTimeout bounds how long a Deployment of a real-node cluster
// may take to have every replica available: its images are on the nodes.
const deploymentTimeout = 3 * time.Minute

// startClusterDNS runs CoreDNS as a Deployment behind kube-dns, as a
// cluster's installer does.
func (s *starter) startClusterDNS(ctx context.Context) error {
	image, err := LocalImage(s.opts.ImagesDir, "coredns")
	if err != nil {
		return err
	}
	var rendered bytes.Buffer
	t := template.Must(template.New("coredns").Option("missingkey=error").Parse(coreDNSManifest))
	if err := t.Execute(&rendered, map[string]string{"Image": image, "ClusterIP": clusterDNSIP}); err != nil {
		return fmt.Errorf("rendering CoreDNS: %w", err)
	}
	objects, err := manifests.Objects(rendered.Bytes())
	if err != nil {
		return err
	}
	apply, err := s.objectClient()
	if err != nil {
		return err
	}
	for _, obj := range objects {
		if err := apply.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	return s.waitDeploymentAvailable(ctx, "kube-system", "coredns")
}

// installMuster applies manifests/ with kubectl, as the user guide says,
// through a kustomization that sets only the images: those the nodes
// imported from make images.
func (s *starter) installMuster(ctx context.Context) error {
	overlay := s.path("install")
	if err := os.MkdirAll(overlay, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", overlay, err)
	}
	base, err := filepath.Abs(s.opts.ManifestsDir)
	if err != nil {
		return fmt.Errorf("resolving --manifests %s: %w", s.opts.ManifestsDir, err)
	}
	// kustomize takes bases by relative path.
	rel, err := filepath.Rel(overlay, base)
	if err != nil {
		return fmt.Errorf("finding %s from %s: %w", base, overlay, err)
	}
	var kustomization strings.Builder
	fmt.Fprintf(&kustomization, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\nimages:\n", rel)
	for _, program := range []string{"muster-scheduler", "muster-controller"} {
		image, err := LocalImage(s.opts.ImagesDir, program)
		if err != nil {
			return err
		}
		name, tag, _ := strings.Cut(strings.TrimPrefix(image, localImageRegistry+"/"), ":")
		fmt.Fprintf(&kustomization, "  - {name: %s, newName: %s, newTag: %q}\n",
			manifestImage(program), localImageRegistry+"/"+name, tag)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization.String()), 0o600); err != nil {
		return fmt.Errorf("writing the kustomization: %w", err)
	}
	applyCtx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	out, err := exec.CommandContext(applyCtx, filepath.Join(s.binDir, "kubectl"), "--kubeconfig", s.cluster.Kubeconfig, "apply", "-k", overlay).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -k %s: %w: %s", overlay, err, strings.TrimSpace(string(out)))
	}
	s.logf("%s", strings.TrimSpace(string(out)))
	for _, name := range []string{"muster-scheduler", "muster-controller"} {
		if err := s.waitDeploymentAvailable(ctx, manifests.SystemNamespace, name); err != nil {
			return err
		}
	}
	return nil
}

// manifestImage is the image manifests/ names a program by.
func manifestImage(program string) string { return "ghcr.io/muster-dev/" + program }

// waitDeploymentAvailable waits until every replica of a Deployment is up
// to date and available, and says what its pods wait for when not.
func (s *starter) waitDeploymentAvailable(ctx context.Context, namespace, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, deploymentTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := s.client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		last = fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, want)
		return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Deployment %s/%s (%s): %w; its pods: %s", namespace, name, last, err, s.podsSummary(ctx, namespace))
	}
	return nil
}

// podsSummary says where each pod of a namespace is and what its
// containers wait for.
func (s *starter) podsSummary(ctx context.Context, namespace string) string {
	pods, err := s.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, pod := range pods.Items {
		part := fmt.Sprintf("%s %s on %q", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		for _, c := range pod.Status.ContainerStatuses {
			if c.State.Waiting != nil {
				part += fmt.Sprintf(" (%s: %s %s)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			}
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Status != "True" && cond.Message != "" {
				part += fmt.Sprintf(" (%s: %s)", cond.Type, cond.Message)
			}
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
