package recovery

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/muster-dev/muster/test/integration/framework"
)

// bindHold is a test-only admission webhook on pods/binding that holds the
// first bind of some pods, so that a test can crash the scheduler between
// the binds of one gang. A held bind is refused when it is let go: the
// crash lost it.
type bindHold struct {
	pods sets.Set[string]

	mu      sync.Mutex
	held    sets.Set[string]
	release chan struct{}
}

// holdBinds starts the webhook on loopback for the binds of pods in the
// test's namespace, and registers it until the test ends.
func holdBinds(t *testing.T, namespace string, pods ...string) *bindHold {
	t.Helper()
	h := &bindHold{pods: sets.New(pods...), held: sets.New[string](), release: make(chan struct{})}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatalf("making the webhook's certificate: %v", err)
	}
	server := &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 10 * time.Second}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for the webhook: %v", err)
	}
	certFile, keyFile := t.TempDir()+"/tls.crt", t.TempDir()+"/tls.key"
	if err := certutil.WriteCert(certFile, certPEM); err != nil {
		t.Fatal(err)
	}
	if err := certutil.WriteCert(keyFile, keyPEM); err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.ServeTLS(listener, certFile, keyFile) }()

	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-binds-" + namespace},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold-binds.test.muster.dev",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To("https://" + listener.Addr().String() + "/"),
				CABundle: certPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
			FailurePolicy:     ptr.To(admissionregistrationv1.Fail),
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:    ptr.To[int32](30),
		}},
	}
	configs := framework.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := configs.Create(context.Background(), config, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering the bind-holding webhook: %v", err)
	}
	t.Cleanup(func() {
		h.letGo()
		if err := configs.Delete(context.Background(), config.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("removing the bind-holding webhook: %v", err)
		}
		_ = server.Close()
	})
	return h
}

func (h *bindHold) serve(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	name := review.Request.Name
	h.mu.Lock()
	hold := h.pods.Has(name) && !h.held.Has(name)
	if hold {
		h.held.Insert(name)
	}
	h.mu.Unlock()
	response := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if hold {
		select {
		case <-h.release:
		case <-r.Context().Done():
		case <-time.After(25 * time.Second):
		}
		response.Allowed = false
		response.Result = &metav1.Status{Message: "the bind was lost in a scheduler crash (test)"}
	}
	review.Response = response
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// heldCount is how many binds are held now or were.
func (h *bindHold) heldCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held.Len()
}

// letGo refuses every held bind; later binds of the same pods pass.
func (h *bindHold) letGo() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}
