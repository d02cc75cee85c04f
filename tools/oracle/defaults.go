package main

import (
	resourceapi "k8s.io/api/resource/v1"
)

// applyDefaults mirrors the few API-server defaults the allocator depends on
// (the defaulting functions live in k8s.io/kubernetes, which is not importable).
func applyDefaults(claim *resourceapi.ResourceClaim) {
	for i := range claim.Spec.Devices.Requests {
		req := &claim.Spec.Devices.Requests[i]
		if req.Exactly != nil {
			defaultCount(&req.Exactly.AllocationMode, &req.Exactly.Count)
			defaultTolerations(req.Exactly.Tolerations)
		}
		for j := range req.FirstAvailable {
			sub := &req.FirstAvailable[j]
			defaultCount(&sub.AllocationMode, &sub.Count)
			defaultTolerations(sub.Tolerations)
		}
	}
}

func defaultCount(mode *resourceapi.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourceapi.DeviceAllocationModeExactCount
	}
	if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultTolerations(tolerations []resourceapi.DeviceToleration) {
	for i := range tolerations {
		if tolerations[i].Operator == "" {
			tolerations[i].Operator = resourceapi.DeviceTolerationOpEqual
		}
	}
}
