// Command coredns is CoreDNS with only the plugins the cluster DNS of
// muster-local's real nodes uses (realnode/coredns.yaml): the Kubernetes
// zone, caching, health and readiness. The release binary links every
// plugin, clouds' DNS APIs among them, which take most of its build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins run in this order, as in CoreDNS's own list.
func init() {
	dnsserver.Directives = []string{"ready", "health", "errors", "cache", "kubernetes", "loop"}
}

func main() {
	coremain.Run()
}
