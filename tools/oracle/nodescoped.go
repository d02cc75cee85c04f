//go:build !dra034

package main

import (
	"errors"

	"k8s.io/dynamic-resource-allocation/structured"
)

// isNodeScoped reports errors that mean "unschedulable on this node" rather
// than a fatal problem (kube-scheduler treats them like an unsatisfiable node).
func isNodeScoped(err error) bool {
	return errors.Is(err, structured.ErrFailedAllocationOnNode)
}
