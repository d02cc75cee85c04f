package main

// The in-use set, as kube-scheduler builds it, for every release; what differs between releases
// (the shared set's element type) is in compat.go / compat_038.go: newAllocatedState, insertShared.

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatedState builds the in-use set the way kube-scheduler does
// (pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go): admin-access
// results are not "in use"; with consumable capacity, a shared result goes to the shared
// set and its consumed capacity is summed; everything else is dedicated.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := newAllocatedState()
	for _, claim := range claims {
		if claim.Status.Allocation != nil {
			addAllocation(&state, claim.Status.Allocation, consumable)
		}
	}
	return state
}

func addAllocation(state *structured.AllocatedState, alloc *resourceapi.AllocationResult, consumable bool) {
	for _, r := range alloc.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if consumable && r.ShareID != nil {
			insertShared(state, id, r.ShareID)
			if r.ConsumedCapacity != nil {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		state.AllocatedDevices.Insert(id)
	}
}
