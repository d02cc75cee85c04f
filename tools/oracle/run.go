package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

var errTimeout = errors.New("timed out trying to allocate devices")

type scenario struct {
	files   []string
	node    string
	gates   string
	version string
}

// outcome is what `labkit allocate -o json` prints.
type outcome struct {
	status string // allocated | unsatisfiable | error
	names  []string
	allocs []resourceapi.AllocationResult
	err    string
}

func (o outcome) exitCode() int {
	switch o.status {
	case "allocated":
		return 0
	case "unsatisfiable":
		return 3
	}
	return 2
}

// json prints the four keys in labkit's order; allocations in claim order.
func (o outcome) json() []byte {
	var b bytes.Buffer
	status, _ := json.Marshal(o.status)
	b.WriteString(`{"status": ` + string(status) + `, "allocations": {`)
	for i, name := range o.names {
		if i > 0 {
			b.WriteString(", ")
		}
		key, _ := json.Marshal(name)
		val, err := json.Marshal(o.allocs[i])
		if err != nil {
			val = []byte("null")
		}
		b.Write(key)
		b.WriteString(": ")
		b.Write(val)
	}
	b.WriteString(`}, "error": `)
	if o.err == "" && o.status != "error" {
		b.WriteString("null")
	} else {
		msg, _ := json.Marshal(o.err)
		b.Write(msg)
	}
	b.WriteString(`, "explanation": null}`)
	return b.Bytes()
}

func failed(err error) outcome { return outcome{status: "error", err: err.Error()} }

// shareIDs replaces generated shareIDs with placeholders when
// LABKIT_DETERMINISTIC_SHAREID=1 (the N-th one, 1-based, in result order).
type shareIDs struct {
	on bool
	n  int
}

func newShareIDs() *shareIDs {
	return &shareIDs{on: os.Getenv("LABKIT_DETERMINISTIC_SHAREID") == "1"}
}

func (s *shareIDs) rewrite(allocs []resourceapi.AllocationResult) {
	if !s.on {
		return
	}
	for i := range allocs {
		for j := range allocs[i].Devices.Results {
			if allocs[i].Devices.Results[j].ShareID != nil {
				s.n++
				id := types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012x", s.n))
				allocs[i].Devices.Results[j].ShareID = &id
			}
		}
	}
}

// prepared is a loaded, defaulted scenario ready for the allocator.
type prepared struct {
	in       *inputs
	features structured.Features
	slices   []*resourceapi.ResourceSlice
	pending  []*resourceapi.ResourceClaim
	gates    map[string]bool
}

func prepare(sc scenario) (*prepared, error) {
	version, err := normalizeVersion(sc.version)
	if err != nil {
		return nil, err
	}
	overrides, err := parseGates(sc.gates)
	if err != nil {
		return nil, err
	}
	gates, err := resolveGates(version, overrides)
	if err != nil {
		return nil, err
	}
	features, err := allocatorFeatures(gates)
	if err != nil {
		return nil, err
	}
	if len(sc.files) == 0 {
		return nil, errors.New("no input: pass -f FILE")
	}
	in, err := loadFiles(sc.files)
	if err != nil {
		return nil, err
	}
	p := &prepared{in: in, features: features, gates: gates, slices: in.slices}
	for _, c := range in.claims {
		applyDefaults(c)
		if c.Status.Allocation == nil {
			p.pending = append(p.pending, c)
		}
	}
	if gates["DRADeviceTaintRules"] {
		p.slices = applyTaintRules(in.slices, in.rules)
	}
	return p, nil
}

func (p *prepared) findNode(name string) (*v1.Node, error) {
	if name == "" {
		return nil, errors.New("--node is required")
	}
	for _, n := range p.in.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	// A node that is not in the input has no labels; node-local slices can still name it.
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

func runScenario(ctx context.Context, sc scenario, ids *shareIDs, timeout time.Duration) outcome {
	p, err := prepare(sc)
	if err != nil {
		return failed(err)
	}
	node, err := p.findNode(sc.node)
	if err != nil {
		return failed(err)
	}
	state := allocatedState(p.in.claims, p.features.ConsumableCapacity)
	alloc, err := newAllocator(ctx, p.features, state, classLister(p.in.classes), p.slices, newCELCache(p.features))
	if err != nil {
		return failed(err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimeout)
		defer cancel()
	}
	results, err := alloc.Allocate(ctx, node, p.pending)
	if err != nil {
		if errors.Is(context.Cause(ctx), errTimeout) {
			// what kube-scheduler reports when filterTimeout expires
			return failed(errors.New("timed out trying to allocate devices"))
		}
		if isNodeScoped(err) {
			return outcome{status: "unsatisfiable", err: err.Error()}
		}
		return failed(err)
	}
	if results == nil && len(p.pending) > 0 {
		return outcome{status: "unsatisfiable"}
	}
	ids.rewrite(results)
	out := outcome{status: "allocated", allocs: results}
	for _, c := range p.pending {
		out.names = append(out.names, c.Namespace+"/"+c.Name)
	}
	return out
}

// classLister serves DeviceClasses from the input.
type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("deviceclass.resource.k8s.io %q not found", name)
}

// applyTaintRules appends the taint of every matching DeviceTaintRule to the
// devices it selects, as kube-scheduler's ResourceSlice tracker does.
func applyTaintRules(slices []*resourceapi.ResourceSlice, rules []taintRule) []*resourceapi.ResourceSlice {
	if len(rules) == 0 {
		return slices
	}
	out := make([]*resourceapi.ResourceSlice, len(slices))
	for i, slice := range slices {
		patched := slice
		for _, rule := range rules {
			if rule.Driver != nil && *rule.Driver != slice.Spec.Driver {
				continue
			}
			if rule.Pool != nil && *rule.Pool != slice.Spec.Pool.Name {
				continue
			}
			for d := range slice.Spec.Devices {
				if rule.Device != nil && *rule.Device != slice.Spec.Devices[d].Name {
					continue
				}
				if patched == slice {
					patched = slice.DeepCopy()
				}
				patched.Spec.Devices[d].Taints = append(patched.Spec.Devices[d].Taints, rule.Taint)
			}
		}
		out[i] = patched
	}
	return out
}
