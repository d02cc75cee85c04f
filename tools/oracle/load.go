package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// taintRule is the part of a DeviceTaintRule the scheduler uses. It is decoded
// into our own struct so that the oracle does not depend on which API version
// (v1alpha3, v1beta2, v1) carries the type in a given release.
type taintRule struct {
	Name   string
	Driver *string
	Pool   *string
	Device *string
	Taint  resourceapi.DeviceTaint
}

// inputs holds every object the oracle understands, in file order.
type inputs struct {
	classes    []*resourceapi.DeviceClass
	slices     []*resourceapi.ResourceSlice
	claims     []*resourceapi.ResourceClaim
	nodes      []*v1.Node
	namespaces []*v1.Namespace
	rules      []taintRule
}

type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// splitYAML splits a multi-document YAML stream on "---" lines.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		trimmed := bytes.TrimRight(line, " \t\r\n")
		if bytes.Equal(trimmed, []byte("---")) || bytes.HasPrefix(trimmed, []byte("--- ")) {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	docs = append(docs, cur.Bytes())
	return docs
}

func loadFiles(paths []string) (*inputs, error) {
	in := &inputs{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot read: %v", path, err)
		}
		for i, doc := range splitYAML(data) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			js, err := toJSON(doc)
			if err != nil {
				return nil, fmt.Errorf("%s:doc %d: %v", path, i+1, err)
			}
			if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
				continue
			}
			if err := in.add(js, fmt.Sprintf("%s:doc %d", path, i+1)); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

// toJSON converts one YAML document; JSON documents (large generated inputs) skip the YAML parser.
func toJSON(doc []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(doc)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		return trimmed, nil
	}
	return yaml.YAMLToJSON(doc)
}

func (in *inputs) add(js []byte, where string) error {
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	if strings.HasSuffix(h.Kind, "List") {
		for j, item := range h.Items {
			if err := in.add(item, fmt.Sprintf("%s item %d", where, j)); err != nil {
				return err
			}
		}
		return nil
	}
	group := h.APIVersion
	if k := strings.LastIndex(group, "/"); k >= 0 {
		group = group[:k]
	} else {
		group = ""
	}
	decode := func(into any) error {
		if err := json.Unmarshal(js, into); err != nil {
			return fmt.Errorf("%s: %s: %v", where, h.Kind, err)
		}
		return nil
	}
	switch {
	case group == "resource.k8s.io" && h.Kind == "DeviceTaintRule":
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				DeviceSelector *struct {
					Driver *string `json:"driver"`
					Pool   *string `json:"pool"`
					Device *string `json:"device"`
				} `json:"deviceSelector"`
				Taint resourceapi.DeviceTaint `json:"taint"`
			} `json:"spec"`
		}
		if err := decode(&obj); err != nil {
			return err
		}
		if obj.Spec.DeviceSelector == nil {
			return nil // no selector matches no devices
		}
		in.rules = append(in.rules, taintRule{Name: obj.Metadata.Name, Driver: obj.Spec.DeviceSelector.Driver,
			Pool: obj.Spec.DeviceSelector.Pool, Device: obj.Spec.DeviceSelector.Device, Taint: obj.Spec.Taint})
	case group == "resource.k8s.io" && h.APIVersion != "resource.k8s.io/v1":
		return fmt.Errorf("%s: %s: apiVersion %s is not supported by the oracle; use resource.k8s.io/v1", where, h.Kind, h.APIVersion)
	case h.APIVersion == "resource.k8s.io/v1" && h.Kind == "DeviceClass":
		obj := &resourceapi.DeviceClass{}
		if err := decode(obj); err != nil {
			return err
		}
		in.classes = append(in.classes, obj)
	case h.APIVersion == "resource.k8s.io/v1" && h.Kind == "ResourceSlice":
		obj := &resourceapi.ResourceSlice{}
		if err := decode(obj); err != nil {
			return err
		}
		in.slices = append(in.slices, obj)
	case h.APIVersion == "resource.k8s.io/v1" && h.Kind == "ResourceClaim":
		obj := &resourceapi.ResourceClaim{}
		if err := decode(obj); err != nil {
			return err
		}
		if obj.Namespace == "" {
			obj.Namespace = "default"
		}
		in.claims = append(in.claims, obj)
	case h.APIVersion == "v1" && h.Kind == "Node":
		obj := &v1.Node{}
		if err := decode(obj); err != nil {
			return err
		}
		in.nodes = append(in.nodes, obj)
	case h.APIVersion == "v1" && h.Kind == "Namespace":
		obj := &v1.Namespace{}
		if err := decode(obj); err != nil {
			return err
		}
		in.namespaces = append(in.namespaces, obj)
	}
	// Everything else (Pods, templates, ...) is not the allocator's business.
	return nil
}
