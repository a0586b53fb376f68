// Package cli is `kubectl muster`: a gang seen as one thing, read from the
// API server with kubectl's own flags and printed as `kubectl get` prints.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	schedulingclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/topology"
)

// options are the flags every command shares.
type options struct {
	config        *genericclioptions.ConfigFlags
	streams       genericiooptions.IOStreams
	output        string
	noHeaders     bool
	allNamespaces bool
	watch         bool
	schedulerName string
	// color is whether the output is a terminal that takes colour.
	color bool
}

// NewCommand returns `kubectl muster` and its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams, color: isTerminal(streams.Out)}
	root := &cobra.Command{
		Use:   "kubectl-muster",
		Short: "Gangs as muster-scheduler sees them: why a gang waits, and where it runs",
		Long: `kubectl muster shows each gang as one thing: its PodGroup of either API, or the
one derived from an operator's job or a Kueue pod group, with its pods, claims,
Kueue workload and what muster-scheduler published of it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs kubectl-muster as `kubectl muster`: its help says so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl muster"},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: one of wide, json, yaml.")
	root.PersistentFlags().BoolVar(&o.noHeaders, "no-headers", false, "Print no header line in tables.")
	root.PersistentFlags().StringVar(&o.schedulerName, "scheduler-name", topology.SchedulerName, "The schedulerName of muster-scheduler's pods: pods of another scheduler are not members.")

	gangs := &cobra.Command{
		Use:   "gangs",
		Short: "List gangs: phase, members bound, launch stage, domain, held rooms and what each waits for",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.runGangs(cmd.Context()) },
	}
	gangs.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the gangs of every namespace.")
	gangs.Flags().BoolVarP(&o.watch, "watch", "w", false, "After the list, print each gang again when it changes.")
	describe := &cobra.Command{
		Use:   "describe gang NAME",
		Short: "Everything about one gang: members by role, holds, rooms, domain, claims, Kueue, attempts, preemptions, elastic changes",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 || args[0] != "gang" {
				return errors.New("usage: kubectl muster describe gang NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.runDescribe(cmd.Context(), args[1]) },
	}
	why := &cobra.Command{
		Use:   "why POD",
		Short: "Why a pod waits, and the fix, from the user guide's troubleshooting table",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.runWhy(cmd.Context(), args[0]) },
	}
	root.AddCommand(gangs, describe, why)
	return root
}

// check refuses an output format it does not print.
func (o *options) check() error {
	switch o.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q is not a format kubectl muster prints: use wide, json or yaml", o.output)
}

// reader builds the clients from kubectl's flags.
func (o *options) reader() (*reader, error) {
	config, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	config = rest.CopyConfig(config)
	config.UserAgent = "kubectl-muster"
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	podGroups, err := schedulingclient.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &reader{kube: kube, podGroups: podGroups, dynamic: dyn, schedulerName: o.schedulerName, now: time.Now}, nil
}

// namespace is the namespace the flags name, or the kubeconfig's.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

func (o *options) warn(s *snapshot) {
	for _, w := range s.warnings {
		fmt.Fprintln(o.streams.ErrOut, "Warning:", w)
	}
}

func (o *options) runGangs(ctx context.Context) error {
	if err := o.check(); err != nil {
		return err
	}
	r, err := o.reader()
	if err != nil {
		return err
	}
	ns := ""
	if !o.allNamespaces {
		if ns, err = o.namespace(); err != nil {
			return err
		}
	}
	s, err := r.read(ctx, ns)
	if err != nil {
		return err
	}
	o.warn(s)
	gangs := s.gangs(o.schedulerName)
	if o.output == "json" || o.output == "yaml" {
		return printList(o.streams.Out, o.output, gangs)
	}
	t := o.table()
	if !o.noHeaders {
		t.header()
	}
	if len(gangs) == 0 && !o.watch {
		where := "namespace " + ns
		if ns == "" {
			where = "any namespace"
		}
		fmt.Fprintf(o.streams.ErrOut, "No gangs found in %s.\n", where)
	}
	printed := map[types.NamespacedName]string{}
	for _, g := range gangs {
		printed[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = t.row(g, s.now)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if !o.watch {
		return nil
	}
	return o.watchGangs(ctx, r, ns, t, printed)
}

// start checks the flags and returns the reader and the namespace they
// name, for a command about one object.
func (o *options) start() (*reader, string, error) {
	if err := o.check(); err != nil {
		return nil, "", err
	}
	r, err := o.reader()
	if err != nil {
		return nil, "", err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, "", err
	}
	return r, ns, nil
}

func (o *options) runDescribe(ctx context.Context, name string) error {
	r, ns, err := o.start()
	if err != nil {
		return err
	}
	s, err := r.read(ctx, ns)
	if err != nil {
		return err
	}
	o.warn(s)
	key := types.NamespacedName{Namespace: ns, Name: name}
	o2 := s.objects(key, o.schedulerName)
	if o2.PodGroup == nil && len(o2.Pods) == 0 {
		return fmt.Errorf("gang %s not found: no PodGroup of either API, and no pod names it; `kubectl muster gangs` lists the namespace's gangs", key)
	}
	g := gangview.View(o2)
	if o.output == "json" || o.output == "yaml" {
		return printObject(o.streams.Out, o.output, g)
	}
	return describe(o.streams.Out, g, s.now, o.color)
}

func (o *options) runWhy(ctx context.Context, name string) error {
	r, ns, err := o.start()
	if err != nil {
		return err
	}
	pod, err := r.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	var gang *gangview.Gang
	if key, ok := topology.GroupOf(pod); ok {
		s, err := r.read(ctx, ns)
		if err != nil {
			return err
		}
		o.warn(s)
		g := gangview.View(s.objects(key, o.schedulerName))
		gang = &g
	}
	answer := gangview.Why(pod, gang, o.schedulerName)
	if o.output == "json" || o.output == "yaml" {
		return printObject(o.streams.Out, o.output, answer)
	}
	return printAnswer(o.streams.Out, answer)
}

// isTerminal reports whether w is a terminal that takes colour: NO_COLOR
// unset, TERM not dumb.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
