package podgroup

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/envinject"
	"github.com/muster-dev/muster/pkg/jobsets"
	"github.com/muster-dev/muster/pkg/topology"
)

// ManagedByLabel marks the objects muster-controller keeps, so that its
// cache holds those and no other Service, ConfigMap or Secret.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "muster-controller"
)

// Reasons of the events about a group's objects.
const (
	ReasonRestored          = "Restored"
	ReasonOwnershipConflict = "OwnershipConflict"
	// ReasonInvalidGroup: the PodGroup is stored, but muster cannot serve
	// it (its webhook was bypassed or came later).
	ReasonInvalidGroup = "InvalidGroup"
	// ReasonObjectsFailed: the API server refused one of the group's
	// objects, for a reason its owner must act on.
	ReasonObjectsFailed = "GroupObjectsFailed"
)

// contentHashAnnotation records a hash of what muster last wrote into an
// object it keeps, so that a later difference is known to be someone
// else's change, not a change of what muster wants.
const contentHashAnnotation = "muster.dev/content-hash"

// retryAfterRefusal is when a group whose objects the API server refused
// is tried again, without a log line each time.
const retryAfterRefusal = time.Minute

// ResourceReconciler keeps, for each PodGroup with roles, the objects its
// members rely on: the headless Service that names them, the ConfigMap with
// their files, and for MPI the Secret with their SSH key pair. Each is
// controlled by the PodGroup, so deleting the group deletes them; a change
// made to one is undone; an object of the same name that the group does not
// control is never touched.
type ResourceReconciler struct {
	// Client reads from the cache, which holds only managed objects;
	// Reader reads from the API server, to tell a foreign object from a
	// missing one.
	Client   client.Client
	Reader   client.Reader
	Groups   *Groups
	Scheme   *runtime.Scheme
	Recorder record.EventRecorder

	// reported remembers, by group, the failure last told in an event, so
	// that each cause is told once and not on every retry.
	reported failureReports
}

// SetupWithManager registers the reconciler: it runs for a PodGroup when
// the PodGroup, one of its objects or one of its pods changes.
func (r *ResourceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("podgroup-resources").
		For(&v1alpha1.PodGroup{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(groupOfPod))
	return r.Groups.watchUpstream(b, &corev1.Service{}, &corev1.ConfigMap{}, &corev1.Secret{}).Complete(r)
}

// Reconcile brings one group's objects in line with its topology.
func (r *ResourceReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pg, err := r.Groups.PodGroup(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pg.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	topo, errs := topology.FromPodGroup(pg)
	if len(errs) == 0 && len(topo.Roles) > 0 && topo.DerivedFrom == "" {
		errs = envinject.CheckSize(envinject.Group{Name: pg.Name, Namespace: pg.Namespace, Topology: topo, WorkerSlots: 1})
	}
	// Its members are refused and its pods not scheduled, so nothing here
	// would serve them; the owner is told once, and a fix of the PodGroup
	// reconciles it again.
	if len(errs) > 0 {
		r.report(pg, ReasonInvalidGroup, fmt.Sprintf("muster cannot serve this group: %s", errs.ToAggregate()))
		return reconcile.Result{}, nil
	}
	// A derived group's Service, files and keys are its operator's.
	if len(topo.Roles) == 0 || topo.DerivedFrom != "" {
		return reconcile.Result{}, nil
	}
	members, err := r.Groups.Members(ctx, pg)
	if err != nil {
		return reconcile.Result{}, err
	}
	names, errs, err := jobsets.Names(ctx, r.Reader, pg.Namespace, topo)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(errs) > 0 {
		r.report(pg, ReasonInvalidGroup, fmt.Sprintf("muster cannot serve this group: %s", errs.ToAggregate()))
		return reconcile.Result{}, nil
	}
	worker, running := workers(topo, members)
	g := envinject.Group{Name: pg.Name, Namespace: pg.Namespace, UID: pg.UID, Topology: topo, WorkerSlots: envinject.Slots(topo, worker), JobSet: names}

	var desired []client.Object
	// A JobSet's members resolve each other through its own Service.
	if names == nil {
		desired = append(desired, desiredService(g, topology.MemberSelector(pg)))
	}
	configMap, err := desiredConfigMap(g, running)
	if err != nil {
		return reconcile.Result{}, err
	}
	desired = append(desired, configMap)
	if topo.Framework == topology.MPI {
		desired = append(desired, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.SSHSecretName()}})
	}
	for _, obj := range desired {
		err := r.ensure(ctx, pg, obj)
		switch {
		case err == nil:
		case apierrors.IsConflict(err):
			// Someone wrote the object since it was read: read it again.
			return requeueOnConflict(err)
		case isRefusal(err):
			r.report(pg, ReasonObjectsFailed, err.Error())
			return reconcile.Result{RequeueAfter: retryAfterRefusal}, nil
		default:
			return reconcile.Result{}, err
		}
	}
	r.reported.clear(req.NamespacedName)
	return reconcile.Result{}, nil
}

// isRefusal reports whether the API server refused a request for a reason
// the group's owner must act on, such as a name it cannot take or an
// object too large to store; a retry alone would not help.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err)
}

// report tells the group's owner of a failure with a Warning event, once
// per cause.
func (r *ResourceReconciler) report(pg *v1alpha1.PodGroup, reason, message string) {
	if r.reported.isNew(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, reason+": "+message) {
		r.Recorder.Event(pg, corev1.EventTypeWarning, reason, message)
	}
}

// failureReports is the last failure told of each group.
type failureReports struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
}

// isNew records cause for the group and reports whether it differs from
// the last one told.
func (f *failureReports) isNew(key types.NamespacedName, cause string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[types.NamespacedName]string{}
	}
	if f.last[key] == cause {
		return false
	}
	f.last[key] = cause
	return true
}

// clear forgets the group's failure once it is reconciled.
func (f *failureReports) clear(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.last, key)
}

// workers returns one worker, whose GPU limit may give the MPI slots, and
// the indices of the workers running now, for discover_hosts.sh and an
// elastic group's files.
func workers(t *topology.Topology, pods []corev1.Pod) (*corev1.Pod, []int32) {
	var first *corev1.Pod
	var running []int32
	for i := range pods {
		pod := &pods[i]
		member, errs := t.Identify(pod)
		if member.Role != "worker" {
			continue
		}
		if first == nil {
			first = pod
		}
		if len(errs) == 0 && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			running = append(running, member.Index)
		}
	}
	return first, running
}

// desiredService is the group's headless Service, which selects its
// members by memberLabel (topology.MemberLabel).
func desiredService(g envinject.Group, members map[string]string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ServiceName()},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  members,
			// Members find each other before they are Ready: a launcher
			// reaches workers that are still starting sshd.
			PublishNotReadyAddresses: true,
		},
	}
	if g.Topology.Port > 0 {
		svc.Spec.Ports = []corev1.ServicePort{{Name: envinject.PortName, Port: g.Topology.Port, Protocol: corev1.ProtocolTCP}}
	}
	return svc
}

func desiredConfigMap(g envinject.Group, runningWorkers []int32) (*corev1.ConfigMap, error) {
	files, err := envinject.Files(g, runningWorkers)
	if err != nil {
		return nil, fmt.Errorf("rendering the files of group %s/%s: %w", g.Namespace, g.Name, err)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.ConfigMapName()}, Data: files}, nil
}

// ensure creates desired if it is missing, and puts back what it manages if
// someone changed it. An object of that name that pg does not control is
// reported and left alone.
func (r *ResourceReconciler) ensure(ctx context.Context, pg *v1alpha1.PodGroup, desired client.Object) error {
	logger := klog.FromContext(ctx)
	kind := kindOf(desired)
	key := client.ObjectKeyFromObject(desired)
	current := desired.DeepCopyObject().(client.Object)
	err := r.Client.Get(ctx, key, current)
	if apierrors.IsNotFound(err) {
		// Not in the cache: missing, or not labelled as ours.
		err = r.Reader.Get(ctx, key, current)
		if apierrors.IsNotFound(err) {
			return r.create(ctx, pg, desired, kind)
		}
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	if !metav1.IsControlledBy(current, pg) {
		r.Recorder.Eventf(pg, corev1.EventTypeWarning, ReasonOwnershipConflict,
			"%s %s exists and does not belong to this PodGroup, so muster leaves it alone and the group's members lack it; rename or delete it",
			kind, key.Name)
		logger.Info("Left alone an object the group does not own", "kind", kind, "object", key, "podGroup", klog.KObj(pg))
		return nil
	}
	// What muster last wrote is still there unless someone else changed
	// it since.
	ours := current.GetAnnotations()[contentHashAnnotation] == contentHash(current)
	changed, err := restore(current, desired)
	if err != nil {
		return fmt.Errorf("restoring %s %s: %w", kind, key, err)
	}
	if len(changed) == 0 {
		return nil
	}
	setContentHash(current)
	if err := r.Client.Update(ctx, current); err != nil {
		return fmt.Errorf("updating %s %s: %w", kind, key, err)
	}
	if ours {
		logger.V(2).Info("Updated", "kind", kind, "object", key, "fields", changed)
		return nil
	}
	r.Recorder.Eventf(pg, corev1.EventTypeWarning, ReasonRestored, "%s %s had been changed; restored %v", kind, key.Name, changed)
	logger.Info("Restored a changed object", "kind", kind, "object", key, "fields", changed)
	return nil
}

// contentHash is a hash of what muster keeps in an object: its managed-by
// label and the fields restore sets.
func contentHash(obj client.Object) string {
	content := []any{obj.GetLabels()[ManagedByLabel]}
	switch obj := obj.(type) {
	case *corev1.Service:
		ports := make([]string, 0, len(obj.Spec.Ports))
		for _, p := range obj.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s/%d/%s", p.Name, p.Port, p.Protocol))
		}
		content = append(content, obj.Spec.Selector, obj.Spec.PublishNotReadyAddresses, ports)
	case *corev1.ConfigMap:
		content = append(content, obj.Data)
	case *corev1.Secret:
		content = append(content, obj.Data)
	}
	data, _ := json.Marshal(content) // maps, strings and bools always encode
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func setContentHash(obj client.Object) {
	annotations := maps.Clone(obj.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[contentHashAnnotation] = contentHash(obj)
	obj.SetAnnotations(annotations)
}

func (r *ResourceReconciler) create(ctx context.Context, pg *v1alpha1.PodGroup, obj client.Object, kind string) error {
	obj.SetLabels(map[string]string{ManagedByLabel: ManagedBy, topology.GroupLabel: pg.Name})
	if secret, ok := obj.(*corev1.Secret); ok {
		if err := fillKeyPair(secret); err != nil {
			return err
		}
	}
	if err := controllerutil.SetControllerReference(owner(pg), obj, r.Scheme); err != nil {
		return fmt.Errorf("owning %s %s: %w", kind, obj.GetName(), err)
	}
	setContentHash(obj)
	if err := r.Client.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Created", "kind", kind, "object", klog.KObj(obj), "podGroup", klog.KObj(pg))
	return nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Service:
		return "Service"
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Secret:
		return "Secret"
	}
	return fmt.Sprintf("%T", obj)
}

// restore sets on current what desired manages and returns the names of
// the fields it had to change.
func restore(current, desired client.Object) ([]string, error) {
	var changed []string
	if current.GetLabels()[ManagedByLabel] != ManagedBy {
		labels := maps.Clone(current.GetLabels())
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ManagedByLabel] = ManagedBy
		current.SetLabels(labels)
		changed = append(changed, "metadata.labels["+ManagedByLabel+"]")
	}
	switch current := current.(type) {
	case *corev1.Service:
		want := desired.(*corev1.Service).Spec
		if !equality.Semantic.DeepEqual(current.Spec.Selector, want.Selector) {
			current.Spec.Selector = want.Selector
			changed = append(changed, "spec.selector")
		}
		if current.Spec.PublishNotReadyAddresses != want.PublishNotReadyAddresses {
			current.Spec.PublishNotReadyAddresses = want.PublishNotReadyAddresses
			changed = append(changed, "spec.publishNotReadyAddresses")
		}
		if !samePorts(current.Spec.Ports, want.Ports) {
			current.Spec.Ports = want.Ports
			changed = append(changed, "spec.ports")
		}
	case *corev1.ConfigMap:
		want := desired.(*corev1.ConfigMap).Data
		if !equality.Semantic.DeepEqual(current.Data, want) {
			current.Data = want
			changed = append(changed, "data")
		}
	case *corev1.Secret:
		// A key pair cannot be put back as it was, only replaced whole
		// when it no longer is one.
		if !isKeyPair(current.Data) {
			if err := fillKeyPair(current); err != nil {
				return nil, err
			}
			changed = append(changed, "data")
		}
	}
	return changed, nil
}

// samePorts compares the fields muster sets; the API server fills in the
// rest, such as targetPort.
func samePorts(have, want []corev1.ServicePort) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		if have[i].Name != want[i].Name || have[i].Port != want[i].Port || have[i].Protocol != want[i].Protocol {
			return false
		}
	}
	return true
}

// fillKeyPair writes a new ed25519 key pair into secret: the private key in
// OpenSSH's format, the public key as an authorized_keys line.
func fillKeyPair(secret *corev1.Secret) error {
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generating an SSH key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(private, "muster "+secret.Namespace+"/"+secret.Name)
	if err != nil {
		return fmt.Errorf("encoding an SSH key: %w", err)
	}
	sshPublic, err := ssh.NewPublicKey(public)
	if err != nil {
		return fmt.Errorf("encoding an SSH public key: %w", err)
	}
	secret.Type = corev1.SecretTypeSSHAuth
	secret.Data = map[string][]byte{
		envinject.SSHPrivateKeyKey: pem.EncodeToMemory(block),
		envinject.SSHPublicKeyKey:  ssh.MarshalAuthorizedKey(sshPublic),
	}
	return nil
}

// isKeyPair reports whether data holds a private key and its public key.
func isKeyPair(data map[string][]byte) bool {
	private, err := ssh.ParsePrivateKey(data[envinject.SSHPrivateKeyKey])
	if err != nil {
		return false
	}
	public, _, _, _, err := ssh.ParseAuthorizedKey(data[envinject.SSHPublicKeyKey])
	if err != nil {
		return false
	}
	return string(private.PublicKey().Marshal()) == string(public.Marshal())
}
