package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// feature_gates.json is labkit/api/feature_gates.json, copied beside this file by
// tools/build-oracle.sh: one gate table for labkit and the oracle. Each gate maps a
// Kubernetes minor version to [maturity, default, locked]; a gate missing from a
// version did not exist in that release.
//
//go:embed feature_gates.json
var gateTableJSON []byte

// gateDefaults holds the default of every gate per Kubernetes minor version.
var gateDefaults = loadGateDefaults(gateTableJSON)

func loadGateDefaults(data []byte) map[string]map[string]bool {
	var table struct {
		Versions []string                                `json:"versions"`
		Gates    map[string]map[string][]json.RawMessage `json:"gates"`
	}
	if err := json.Unmarshal(data, &table); err != nil {
		panic(fmt.Sprintf("feature_gates.json: %v", err))
	}
	out := map[string]map[string]bool{}
	for _, v := range table.Versions {
		out[v] = map[string]bool{}
	}
	for gate, byVersion := range table.Gates {
		for v, entry := range byVersion {
			var on bool
			if _, ok := out[v]; !ok || len(entry) != 3 || json.Unmarshal(entry[1], &on) != nil {
				panic(fmt.Sprintf("feature_gates.json: gate %s, version %s: want a listed version and [maturity, default, locked]", gate, v))
			}
			out[v][gate] = on
		}
	}
	return out
}

// gateToField maps a feature gate to the structured.Features field it drives.
// DeviceBindingAndStatus needs two gates and is handled separately.
var gateToField = map[string]string{
	"DRAAdminAccess":               "AdminAccess",
	"DRAPrioritizedList":           "PrioritizedList",
	"DRAPartitionableDevices":      "PartitionableDevices",
	"DRADeviceTaints":              "DeviceTaints",
	"DRAConsumableCapacity":        "ConsumableCapacity",
	"DRAFractionalCapacityRange":   "FractionalCapacityRange",
	"DRAListTypeAttributes":        "ListTypeAttributes",
	"DRAOptionalNodeOperations":    "OptionalNodeOperations",
	"DRADerivedAttributes":         "DerivedAttributes",
	"DRADeviceCompatibilityGroups": "CompatibilityGroups",
}

func normalizeVersion(v string) (string, error) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	parts := strings.Split(v, ".")
	if len(parts) >= 2 {
		v = parts[0] + "." + parts[1]
	}
	if _, ok := gateDefaults[v]; !ok {
		known := make([]string, 0, len(gateDefaults))
		for k := range gateDefaults {
			known = append(known, k)
		}
		sort.Strings(known)
		return "", fmt.Errorf("--kubernetes-version %q: unsupported; use one of %s", v, strings.Join(known, ", "))
	}
	return v, nil
}

// resolveGates returns the effective gates: version defaults plus overrides (gates
// of that version only, like labkit.api.features.resolve_gates).
func resolveGates(version string, overrides map[string]bool) (map[string]bool, error) {
	gates := map[string]bool{}
	for k, v := range gateDefaults[version] {
		gates[k] = v
	}
	for k, v := range overrides {
		if _, ok := gateDefaults[version][k]; !ok {
			return nil, fmt.Errorf("--feature-gates: feature gate %q does not exist in Kubernetes %s", k, version)
		}
		gates[k] = v
	}
	return gates, nil
}

// parseGates parses "A=true,B=false".
func parseGates(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("--feature-gates: %q is not NAME=true|false", item)
		}
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			out[strings.TrimSpace(k)] = true
		case "false":
			out[strings.TrimSpace(k)] = false
		default:
			return nil, fmt.Errorf("--feature-gates: %q is not NAME=true|false", item)
		}
	}
	return out, nil
}

// allocatorFeatures builds structured.Features by field name, so that the same
// source compiles against releases whose Features struct has fewer fields. A
// gate that is on but has no field in this release is an error.
func allocatorFeatures(gates map[string]bool) (structured.Features, error) {
	var f structured.Features
	rv := reflect.ValueOf(&f).Elem()
	set := func(field string, on bool, gate string) error {
		fv := rv.FieldByName(field)
		if !fv.IsValid() {
			if on {
				return fmt.Errorf("--feature-gates: %s is not supported by this allocator release", gate)
			}
			return nil
		}
		fv.SetBool(on)
		return nil
	}
	for gate, field := range gateToField {
		if err := set(field, gates[gate], gate); err != nil {
			return f, err
		}
	}
	err := set("DeviceBindingAndStatus", gates["DRADeviceBindingConditions"] && gates["DRAResourceClaimDeviceStatus"],
		"DRADeviceBindingConditions")
	return f, err
}

// newCELCache sets the CEL compiler features by name: older releases lack some.
func newCELCache(f structured.Features) *cel.Cache {
	var cf cel.Features
	src := reflect.ValueOf(f)
	dst := reflect.ValueOf(&cf).Elem()
	for from, to := range map[string]string{"ConsumableCapacity": "EnableConsumableCapacity",
		"ListTypeAttributes": "EnableListTypeAttributes"} {
		if sv, dv := src.FieldByName(from), dst.FieldByName(to); sv.IsValid() && dv.IsValid() {
			dv.SetBool(sv.Bool())
		}
	}
	return cel.NewCache(1000, cf)
}
