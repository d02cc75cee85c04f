//go:build !dra038

package main

// Release-specific glue: the only place that touches APIs whose shape differs
// between k8s.io/dynamic-resource-allocation releases (v0.34-v0.37 here,
// v0.38 in compat_038.go).

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatedState builds the in-use set the way kube-scheduler does: admin-access
// results are not "in use"; with consumable capacity, shared results go to the
// shared set and their consumed capacity is summed; everything else is dedicated.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
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
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		state.AllocatedDevices.Insert(id)
	}
}

func newAllocator(ctx context.Context, f structured.Features, state structured.AllocatedState,
	classes structured.DeviceClassLister, slices []*resourceapi.ResourceSlice, cache *cel.Cache) (structured.Allocator, error) {
	return structured.NewAllocator(ctx, f, state, classes, slices, cache)
}
