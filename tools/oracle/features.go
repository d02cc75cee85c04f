package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/dynamic-resource-allocation/structured"
)

// gateDefaults holds the defaults of the gates the allocator (or the oracle's
// taint-rule merge) looks at, per Kubernetes minor version.
var gateDefaults = map[string]map[string]bool{
	"1.34": {"DRAAdminAccess": true, "DRAResourceClaimDeviceStatus": true, "DRAPrioritizedList": true},
	"1.35": {"DRAAdminAccess": true, "DRAResourceClaimDeviceStatus": true, "DRAPrioritizedList": true},
	"1.36": {"DRAAdminAccess": true, "DRAResourceClaimDeviceStatus": true, "DRAPrioritizedList": true,
		"DRAPartitionableDevices": true, "DRADeviceTaints": true, "DRAConsumableCapacity": true,
		"DRADeviceBindingConditions": true},
	"1.37": {"DRAAdminAccess": true, "DRAResourceClaimDeviceStatus": true, "DRAPrioritizedList": true,
		"DRAPartitionableDevices": true, "DRADeviceTaints": true, "DRADeviceTaintRules": true,
		"DRAConsumableCapacity": true, "DRADeviceBindingConditions": true, "DRAFractionalCapacityRange": true},
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

// otherGates are accepted but do not change the allocator.
var otherGates = map[string]bool{
	"DynamicResourceAllocation": true, "DRAResourceClaimDeviceStatus": true, "DRADeviceBindingConditions": true,
	"DRADeviceTaintRules": true, "DRAExtendedResource": true, "DRASchedulerFilterTimeout": true,
	"DRANodeAllocatableResources": true, "DRAWorkloadResourceClaims": true, "DRAResourcePoolStatus": true,
	"DRAResourceClaimGranularStatusAuthorization": true, "ResourceHealthStatus": true,
	"KubeletPodResourcesDynamicResources": true, "DRAPartitionableDevicesType": true,
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

// resolveGates returns the effective gates: version defaults plus overrides.
func resolveGates(version string, overrides map[string]bool) (map[string]bool, error) {
	gates := map[string]bool{}
	for k, v := range gateDefaults[version] {
		gates[k] = v
	}
	for k, v := range overrides {
		if _, ok := gateToField[k]; !ok && !otherGates[k] {
			return nil, fmt.Errorf("--feature-gates: unknown gate %q", k)
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
