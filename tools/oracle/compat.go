//go:build !dra038

package main

// Release-specific glue: the only place that touches APIs whose shape differs
// between k8s.io/dynamic-resource-allocation releases (v0.34-v0.37 here,
// v0.38 in compat_038.go).

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func newAllocatedState() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

// insertShared: before v0.38 the shared set holds (device, share) pairs.
func insertShared(state *structured.AllocatedState, id structured.DeviceID, share *types.UID) {
	state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, share))
}

func newAllocator(ctx context.Context, f structured.Features, state structured.AllocatedState,
	classes structured.DeviceClassLister, slices []*resourceapi.ResourceSlice, cache *cel.Cache) (structured.Allocator, error) {
	return structured.NewAllocator(ctx, f, state, classes, slices, cache)
}
