package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

// runBench places every pending claim, one at a time and in input order, on the
// first Node (input order) where it fits, growing the in-use set as it goes, the
// way a scheduler handles one pod per cycle. Only the loop is timed.
func runBench(ctx context.Context, opts *options) int {
	p, err := prepare(scenario{files: opts.files, gates: opts.gates, version: opts.version})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if len(p.in.nodes) == 0 {
		fmt.Fprintln(os.Stderr, "--bench: the input has no Node objects")
		return 2
	}
	state := allocatedState(p.in.claims, p.features.ConsumableCapacity)
	cache := newCELCache(p.features)
	classes := classLister(p.in.classes)
	placements := make([]*string, len(p.pending))
	calls, placed, errs := 0, 0, 0
	start, cpuStart := time.Now(), cpuSeconds()
	for i, claim := range p.pending {
		alloc, err := newAllocator(ctx, p.features, state, classes, p.slices, cache)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for _, node := range p.in.nodes {
			calls++
			results, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
			if err != nil {
				if isNodeScoped(err) {
					continue
				}
				errs++
				break
			}
			if results != nil {
				addAllocation(&state, &results[0], p.features.ConsumableCapacity)
				name := node.Name
				placements[i] = &name
				placed++
				break
			}
		}
	}
	elapsed, cpu := time.Since(start).Seconds(), cpuSeconds()-cpuStart
	out, _ := json.Marshal(map[string]any{
		"claims": len(p.pending), "placed": placed, "errors": errs, "allocateCalls": calls,
		"seconds": elapsed, "cpuSeconds": cpu, "placements": placements,
	})
	fmt.Println(string(out))
	return 0
}

// cpuSeconds is the process' user+system CPU time (the machine may be shared).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
