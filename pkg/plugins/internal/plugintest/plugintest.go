// Package plugintest holds what the plugins' unit tests share.
package plugintest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Activator stands in for the scheduling queue and records the pods a
// plugin asks it to retry, by namespace/name.
type Activator struct{ Activated []string }

// Activate records the pods.
func (a *Activator) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for key := range pods {
		a.Activated = append(a.Activated, key)
	}
}
