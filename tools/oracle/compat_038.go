//go:build dra038

package main

// Release-specific glue for k8s.io/dynamic-resource-allocation v0.38 (compat.go
// has v0.34-v0.37): NewAllocator takes the library's internal ResourceSlice type
// and the shared-device set holds plain device IDs.

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatedState builds the in-use set the way kube-scheduler 1.38 does
// (pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go):
// admin-access results are not "in use"; with consumable capacity, a shared
// result puts its device into the shared set and its consumed capacity is
// summed; everything else is dedicated.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.DeviceID](),
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
			state.AllocatedSharedDeviceIDs.Insert(id)
			if r.ConsumedCapacity != nil {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
			continue
		}
		state.AllocatedDevices.Insert(id)
	}
}

// newAllocator converts the slices as kube-scheduler's ResourceSlice informer
// does (draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice).
func newAllocator(ctx context.Context, f structured.Features, state structured.AllocatedState,
	classes structured.DeviceClassLister, slices []*resourceapi.ResourceSlice, cache *cel.Cache) (structured.Allocator, error) {
	converted := make([]*draapi.ResourceSlice, len(slices))
	for i, slice := range slices {
		out := &draapi.ResourceSlice{}
		if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(slice, out, nil); err != nil {
			return nil, fmt.Errorf("ResourceSlice %s: %w", slice.Name, err)
		}
		converted[i] = out
	}
	return structured.NewAllocator(ctx, f, state, classes, converted, cache)
}
