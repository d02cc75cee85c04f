// Command plugin-interop plays the kubelet against the fake_gpus plugin using the real
// generated Go API of k8s.io/kubelet (pluginregistration/v1, dra/v1, dra/v1beta1), then
// loads the CDI specs the plugin wrote with the CDI reference library and injects the
// returned device IDs into an empty OCI spec, as containerd would. Prints one JSON object.
//
// It proves wire compatibility of the hand-written protos and CDI validity; it is a test
// tool, not part of the plugin.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drav1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drav1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

type claimRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

type device struct {
	RequestNames []string `json:"requestNames"`
	Pool         string   `json:"pool"`
	Device       string   `json:"device"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
	ShareID      *string  `json:"shareID,omitempty"`
}

type claimResult struct {
	Devices []device `json:"devices"`
	Error   string   `json:"error"`
	Env     []string `json:"env,omitempty"`
	CDI     string   `json:"cdiError,omitempty"`
}

type report struct {
	Info      map[string]any                    `json:"info"`
	Prepare   map[string]map[string]claimResult `json:"prepare"`
	Unprepare map[string]map[string]string      `json:"unprepare"`
	CDIErrors map[string][]string               `json:"cdiErrors"`
	Health    map[string]string                 `json:"health,omitempty"`
}

func dial(path string) *grpc.ClientConn {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("dial %s: %v", path, err)
	}
	return conn
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "plugin-interop: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	regSock := flag.String("registration", "", "plugin registration socket")
	claimsJSON := flag.String("claims", "[]", `claims: [{"namespace":..,"name":..,"uid":..}]`)
	cdiDir := flag.String("cdi-dir", "", "CDI spec dir to validate (optional)")
	unprepare := flag.Bool("unprepare", true, "unprepare the claims at the end")
	flag.Parse()
	var claims []claimRef
	if err := json.Unmarshal([]byte(*claimsJSON), &claims); err != nil {
		fail("-claims: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	reg := registerapi.NewRegistrationClient(dial(*regSock))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		fail("GetInfo: %v", err)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		fail("NotifyRegistrationStatus: %v", err)
	}
	out := report{
		Info: map[string]any{"type": info.Type, "name": info.Name, "endpoint": info.Endpoint,
			"supportedVersions": info.SupportedVersions},
		Prepare:   map[string]map[string]claimResult{},
		Unprepare: map[string]map[string]string{},
		CDIErrors: map[string][]string{},
	}
	conn := dial(info.Endpoint)

	// v1
	v1 := drav1.NewDRAPluginClient(conn)
	req1 := &drav1.NodePrepareResourcesRequest{}
	for _, c := range claims {
		req1.Claims = append(req1.Claims, &drav1.Claim{Namespace: c.Namespace, Name: c.Name, Uid: c.UID})
	}
	resp1, err := v1.NodePrepareResources(ctx, req1)
	if err != nil {
		fail("v1 NodePrepareResources: %v", err)
	}
	out.Prepare["v1"] = map[string]claimResult{}
	for uid, r := range resp1.Claims {
		res := claimResult{Error: r.Error}
		for _, d := range r.Devices {
			res.Devices = append(res.Devices, device{d.RequestNames, d.PoolName, d.DeviceName, d.CdiDeviceIds, d.ShareId})
		}
		out.Prepare["v1"][uid] = res
	}

	// v1beta1 (same claims again: prepare is idempotent)
	vb := drav1beta1.NewDRAPluginClient(conn)
	reqb := &drav1beta1.NodePrepareResourcesRequest{}
	for _, c := range claims {
		reqb.Claims = append(reqb.Claims, &drav1beta1.Claim{Namespace: c.Namespace, Name: c.Name, Uid: c.UID})
	}
	respb, err := vb.NodePrepareResources(ctx, reqb)
	if err != nil {
		fail("v1beta1 NodePrepareResources: %v", err)
	}
	out.Prepare["v1beta1"] = map[string]claimResult{}
	for uid, r := range respb.Claims {
		res := claimResult{Error: r.Error}
		for _, d := range r.Devices {
			res.Devices = append(res.Devices, device{d.RequestNames, d.PoolName, d.DeviceName, d.CdiDeviceIds, nil})
		}
		out.Prepare["v1beta1"][uid] = res
	}

	if *cdiDir != "" {
		cache, err := cdi.NewCache(cdi.WithSpecDirs(*cdiDir), cdi.WithAutoRefresh(false))
		if err != nil {
			out.CDIErrors["<cache>"] = []string{err.Error()}
		}
		for path, errs := range cache.GetErrors() {
			for _, e := range errs {
				out.CDIErrors[path] = append(out.CDIErrors[path], e.Error())
			}
		}
		for uid, res := range out.Prepare["v1"] {
			var ids []string
			for _, d := range res.Devices {
				ids = append(ids, d.CDIDeviceIDs...)
			}
			spec := &oci.Spec{Process: &oci.Process{}}
			if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
				res.CDI = fmt.Sprintf("%v (unresolved %v)", err, unresolved)
			}
			env := append([]string(nil), spec.Process.Env...)
			sort.Strings(env)
			res.Env = env
			out.Prepare["v1"][uid] = res
		}
	}

	for _, v := range info.SupportedVersions {
		if v != "v1.DRAResourceHealth" {
			continue
		}
		stream, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
		if err != nil {
			fail("v1 NodeWatchResources: %v", err)
		}
		msg, err := stream.Recv()
		if err != nil {
			fail("v1 NodeWatchResources Recv: %v", err)
		}
		out.Health = map[string]string{}
		for _, d := range msg.Devices {
			out.Health[d.Device.PoolName+"/"+d.Device.DeviceName] = d.Health.String()
		}
	}

	if *unprepare {
		reqU := &drav1.NodeUnprepareResourcesRequest{Claims: req1.Claims}
		respU, err := v1.NodeUnprepareResources(ctx, reqU)
		if err != nil {
			fail("v1 NodeUnprepareResources: %v", err)
		}
		out.Unprepare["v1"] = map[string]string{}
		for uid, r := range respU.Claims {
			out.Unprepare["v1"][uid] = r.Error
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fail("encode: %v", err)
	}
}
