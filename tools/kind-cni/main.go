// labkit-cni: the smallest pod network a kind cluster needs, for node images built offline
// (kindnetd is not on the Go module proxy). Runs as a hostNetwork DaemonSet on every node and,
// every few seconds:
//   - writes this node's CNI config: ptp + host-local IPAM over the node's spec.podCIDR;
//   - routes every other node's podCIDR via that node's InternalIP (all nodes share one L2
//     docker network, so a direct route is enough).
//
// It talks to the API server with the pod's service-account token over plain HTTPS (no
// client-go), at $CONTROL_PLANE_ENDPOINT (kind sets it) or the in-cluster service address.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

const (
	saDir     = "/var/run/secrets/kubernetes.io/serviceaccount"
	confName  = "10-labkit-ptp.conflist"
	netName   = "labkit"
	resyncGap = 5 * time.Second
)

type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR  string   `json:"podCIDR"`
		PodCIDRs []string `json:"podCIDRs"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
	} `json:"status"`
}

func (n node) cidrs() []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

func (n node) internalIPs() []net.IP {
	var ips []net.IP
	for _, a := range n.Status.Addresses {
		if a.Type == "InternalIP" {
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	return ips
}

type apiClient struct {
	base   string
	token  string
	client *http.Client
}

func newAPIClient() (*apiClient, error) {
	endpoint := os.Getenv("CONTROL_PLANE_ENDPOINT")
	if endpoint == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" {
			return nil, fmt.Errorf("neither CONTROL_PLANE_ENDPOINT nor KUBERNETES_SERVICE_HOST is set")
		}
		endpoint = net.JoinHostPort(host, port)
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	return &apiClient{
		base: "https://" + endpoint,
		client: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		},
	}, nil
}

func (c *apiClient) nodes(ctx context.Context) ([]node, error) {
	// the token is rotated by the kubelet: read it for every request
	token, err := os.ReadFile(filepath.Join(saDir, "token"))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/nodes: %s", resp.Status)
	}
	var list struct {
		Items []node `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// cniConfig is the conflist for this node: one ptp veth per pod, addresses from the podCIDR.
func cniConfig(cidrs []string) ([]byte, error) {
	var ranges [][]map[string]string
	for _, c := range cidrs {
		ranges = append(ranges, []map[string]string{{"subnet": c}})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       netName,
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    1500,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": ranges,
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return false, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

func sync(ctx context.Context, api *apiClient, self, confDir string) error {
	nodes, err := api.nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		cidrs := n.cidrs()
		if len(cidrs) == 0 {
			continue
		}
		if n.Metadata.Name == self {
			data, err := cniConfig(cidrs)
			if err != nil {
				return err
			}
			changed, err := writeIfChanged(filepath.Join(confDir, confName), data)
			if err != nil {
				return err
			}
			if changed {
				log.Printf("wrote %s for podCIDRs %v", confName, cidrs)
			}
			continue
		}
		for _, c := range cidrs {
			_, dst, err := net.ParseCIDR(c)
			if err != nil {
				return fmt.Errorf("node %s: podCIDR %q: %w", n.Metadata.Name, c, err)
			}
			for _, gw := range n.internalIPs() {
				if (gw.To4() == nil) != (dst.IP.To4() == nil) {
					continue // route each family through an address of the same family
				}
				if err := netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: gw}); err != nil {
					return fmt.Errorf("route %s via %s (node %s): %w", dst, gw, n.Metadata.Name, err)
				}
			}
		}
	}
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	self := os.Getenv("NODE_NAME")
	if self == "" {
		log.Fatal("NODE_NAME is not set (give it from the downward API: spec.nodeName)")
	}
	confDir := os.Getenv("CNI_CONF_DIR")
	if confDir == "" {
		confDir = "/etc/cni/net.d"
	}
	api, err := newAPIClient()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Printf("labkit-cni on node %s, API %s, CNI config in %s", self, api.base, confDir)
	for {
		if err := sync(ctx, api, self, confDir); err != nil {
			log.Printf("sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(resyncGap):
		}
	}
}
