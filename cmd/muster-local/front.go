package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/muster-dev/muster/pkg/localcluster"
)

// newFrontCommand runs the front of several muster-controller replicas,
// which `up --controller-replicas` starts as one of the cluster's programs.
func newFrontCommand() *cobra.Command {
	front := &localcluster.Front{ProbePeriod: 250 * time.Millisecond}
	var backends []string
	cmd := &cobra.Command{
		Use:    "front",
		Short:  "Forward connections to the ready replicas, round-robin, as a Service would (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, b := range backends {
				addr, ready, ok := strings.Cut(b, "=")
				if !ok || addr == "" || ready == "" {
					return fmt.Errorf("--backend=%q: want ADDRESS=READINESS-URL, for example 127.0.0.1:9443=http://127.0.0.1:8081/readyz", b)
				}
				front.Backends = append(front.Backends, localcluster.Backend{Addr: addr, Ready: ready})
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return front.Serve(ctx)
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&front.Listen, "listen", "127.0.0.1:9443", "address to accept connections on")
	flags.StringArrayVar(&backends, "backend", nil, "a replica as ADDRESS=READINESS-URL; repeat for each")
	flags.DurationVar(&front.ProbePeriod, "probe-period", front.ProbePeriod, "how often each replica's readiness is probed")
	return cmd
}
