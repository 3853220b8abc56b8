package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// HostNetwork is the network of an environment with real nodes: a bridge on
// the host (layer 2 only: no forwarding or iptables rule on the host) into
// which each node's network namespace is plugged by a veth pair. The host's
// address on it is where every API server of the environment serves, so
// pods reach their cluster's API server through the kubernetes Service and
// the manager's pods reach the workers'; each node's pods have a subnet of
// their own, routed on the host to that node, so an API server reaches a
// webhook or an aggregated API behind a Service (--enable-aggregator-routing).
//
// Index n gives the bridge jf<n>br, the host 10.250.<n>.1/24, the node of
// slot s 10.250.<n>.<10+s> and its pods 10.<100+n>.<s>.0/24: several
// environments run at once on distinct indexes.
type HostNetwork struct {
	Index  int    `json:"index"`
	Bridge string `json:"bridge"`
}

// maxHostNetworks bounds the indexes (and so the environments with real
// nodes running at once).
const maxHostNetworks = 64

// HostIP is the host's address on the bridge.
func (n HostNetwork) HostIP() string { return fmt.Sprintf("10.250.%d.1", n.Index) }

func (n HostNetwork) nodeIP(slot int) string { return fmt.Sprintf("10.250.%d.%d", n.Index, 10+slot) }

func (n HostNetwork) podCIDR(slot int) string { return fmt.Sprintf("10.%d.%d.0/24", 100+n.Index, slot) }

// podGateway is the node's address on its pods' bridge.
func (n HostNetwork) podGateway(slot int) string { return fmt.Sprintf("10.%d.%d.1", 100+n.Index, slot) }

func networkFile(envDir string) string { return filepath.Join(envDir, "network.json") }

// newHostNetwork takes the first free index, creates its bridge, records it
// in envDir and holds the host's ledger for the environment.
func newHostNetwork(envDir string) (*HostNetwork, error) {
	var n *HostNetwork
	// The index is taken by creating its bridge, under the host's lock.
	err := withHostLock(func() error {
		for i := range maxHostNetworks {
			bridge := fmt.Sprintf("jf%dbr", i)
			if _, err := net.InterfaceByName(bridge); err == nil {
				continue
			}
			n = &HostNetwork{Index: i, Bridge: bridge}
			// Recorded before it exists, so StopEnvironment removes
			// whatever part of it was made.
			if err := writeJSON(networkFile(envDir), n); err != nil {
				return err
			}
			return command("ip", "link", "add", n.Bridge, "type", "bridge")
		}
		return fmt.Errorf("every one of the %d host networks for real nodes is in use (bridges jf0br..jf%dbr): stop an environment with `jobferry-dev down`", maxHostNetworks, maxHostNetworks-1)
	})
	if err != nil {
		return nil, err
	}
	if err := holdHost(envDir); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"addr", "add", n.HostIP() + "/24", "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	} {
		if err := command("ip", args...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// loadHostNetwork reads the network an environment recorded; nil if none.
func loadHostNetwork(envDir string) (*HostNetwork, error) {
	data, err := os.ReadFile(networkFile(envDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n HostNetwork
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("reading %s: %w", networkFile(envDir), err)
	}
	return &n, nil
}

// removeHostNetwork deletes the environment's bridge (the routes through
// it go with it), its record, and releases the host's ledger: the last
// environment out puts the host back as it was.
func removeHostNetwork(envDir string) error {
	// All under the host's lock: an interrupt's handler and the failing
	// start it interrupted may both remove it, and whichever comes second
	// must find it gone, ledger released, not half done.
	return withHostLock(func() error {
		n, err := loadHostNetwork(envDir)
		if err != nil || n == nil {
			return err
		}
		if _, err := net.InterfaceByName(n.Bridge); err == nil {
			if err := command("ip", "link", "del", n.Bridge); err != nil {
				return err
			}
		}
		if err := os.Remove(networkFile(envDir)); err != nil {
			return err
		}
		return releaseHostLocked(envDir)
	})
}
