package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// caseFile is case.yaml beside input.yaml: how to call the allocator.
type caseFile struct {
	Node              string          `json:"node"`
	KubernetesVersion string          `json:"kubernetesVersion"`
	FeatureGates      json.RawMessage `json:"featureGates"`
}

func (c caseFile) gates() (string, error) {
	if len(c.FeatureGates) == 0 || string(c.FeatureGates) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(c.FeatureGates, &s); err == nil {
		return s, nil
	}
	var m map[string]bool
	if err := json.Unmarshal(c.FeatureGates, &m); err != nil {
		return "", fmt.Errorf("featureGates: want a map of gate: bool or a G=true,... string")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%t", k, m[k])
	}
	return strings.Join(parts, ","), nil
}

func loadCase(dir string) (scenario, error) {
	sc := scenario{files: []string{filepath.Join(dir, "input.yaml")}, version: "1.37"}
	data, err := os.ReadFile(filepath.Join(dir, "case.yaml"))
	if err != nil {
		return sc, fmt.Errorf("%s: %v", dir, err)
	}
	var c caseFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		return sc, fmt.Errorf("%s/case.yaml: %v", dir, err)
	}
	sc.node = c.Node
	if c.KubernetesVersion != "" {
		sc.version = c.KubernetesVersion
	}
	sc.gates, err = c.gates()
	if err != nil {
		return sc, fmt.Errorf("%s/case.yaml: %v", dir, err)
	}
	return sc, nil
}

// runBatch runs every DIR/*/ that has an input.yaml and prints one JSON line
// per case: {"name": ..., "exit": N, "output": <labkit allocate JSON>}.
func runBatch(ctx context.Context, dir string, timeout time.Duration, w io.Writer) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--batch %s: %v\n", dir, err)
		return 2
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "input.yaml")); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		var out outcome
		sc, err := loadCase(filepath.Join(dir, name))
		if err != nil {
			out = failed(err)
		} else {
			out = runScenario(ctx, sc, newShareIDs(), timeout)
		}
		nameJSON, _ := json.Marshal(name)
		fmt.Fprintf(w, `{"name": %s, "exit": %d, "output": %s}`+"\n", nameJSON, out.exitCode(), out.json())
	}
	return 0
}
