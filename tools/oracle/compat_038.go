//go:build dra038

package main

// Release-specific glue for k8s.io/dynamic-resource-allocation v0.38 (compat.go
// has v0.34-v0.37): NewAllocator takes the library's internal ResourceSlice type
// and the shared-device set holds plain device IDs.

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func newAllocatedState() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.DeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

// insertShared: from v0.38 the shared set holds the device alone.
func insertShared(state *structured.AllocatedState, id structured.DeviceID, _ *types.UID) {
	state.AllocatedSharedDeviceIDs.Insert(id)
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
