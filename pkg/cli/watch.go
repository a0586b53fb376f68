package cli

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// watchGangs prints a gang again, without a header, each time what it
// shows changes, as `kubectl get --watch` does, until ctx ends. Any
// change of a pod, a PodGroup or an event in the namespace reads the
// gangs again.
func (o *options) watchGangs(ctx context.Context, r *reader, ns string, t *table, printed map[types.NamespacedName]string) error {
	changes := make(chan struct{}, 1)
	starts := []func(context.Context) (watch.Interface, error){
		func(ctx context.Context) (watch.Interface, error) {
			return r.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		},
		func(ctx context.Context) (watch.Interface, error) {
			return r.podGroups.SchedulingV1alpha1().PodGroups(ns).Watch(ctx, metav1.ListOptions{})
		},
		func(ctx context.Context) (watch.Interface, error) {
			return r.kube.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{})
		},
	}
	errs := make(chan error, len(starts))
	for _, start := range starts {
		go func() { errs <- follow(ctx, start, changes) }()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-changes:
		}
		s, err := r.read(ctx, ns)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, g := range s.gangs(o.schedulerName) {
			key := types.NamespacedName{Namespace: g.Namespace, Name: g.Name}
			line := t.rowString(g)
			if printed[key] == line {
				continue
			}
			printed[key] = t.row(g, s.now)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
}

// follow sends on changes, without blocking, for each event of the watch
// start opens, opening it again when the server closes it.
func follow(ctx context.Context, start func(context.Context) (watch.Interface, error), changes chan<- struct{}) error {
	for ctx.Err() == nil {
		w, err := start(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching: %w", err)
		}
		for range w.ResultChan() {
			select {
			case changes <- struct{}{}:
			default:
			}
		}
		w.Stop()
	}
	return nil
}
