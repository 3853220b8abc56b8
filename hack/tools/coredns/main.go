// Command coredns is CoreDNS (github.com/coredns/coredns) with only the
// plugins a real node's cluster DNS needs: it answers for the cluster's
// Services and pods from the API server (kubernetes), caches, logs errors
// and says when it is ready. Each real node runs one, as a node daemon
// bound to the node's address, which the kubelet gives pods as their
// nameserver. Upstream's binary links every plugin (cloud DNS SDKs, etcd,
// ...); this is the composition CoreDNS documents for a build of one's own.
//
//	coredns -conf Corefile
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins, in the order CoreDNS chains them (its
// plugin.cfg order).
var directives = []string{"errors", "ready", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
