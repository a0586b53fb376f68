package webhooks

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Setup registers every webhook on the manager's webhook server, at the
// paths the webhook configurations of manifests/ name.
func Setup(mgr ctrl.Manager, clusterDomain string) {
	server, scheme := mgr.GetWebhookServer(), mgr.GetScheme()
	server.Register(PodPath, admission.WithCustomDefaulter(scheme, &corev1.Pod{},
		&PodDefaulter{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), ClusterDomain: clusterDomain}))
	server.Register(PodUpdatePath, admission.WithCustomValidator(scheme, &corev1.Pod{}, PodUpdateValidator{}))
	server.Register(PodGroupPath, admission.WithCustomValidator(scheme, &v1alpha1.PodGroup{}, PodGroupValidator{}))
	server.Register(UpstreamPodGroupPath, admission.WithCustomValidator(scheme, &schedulingv1beta1.PodGroup{}, UpstreamPodGroupValidator{}))
}
