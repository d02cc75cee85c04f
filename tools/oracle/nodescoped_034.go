//go:build dra034

package main

// isNodeScoped: v0.34 has no node-scoped allocator errors.
func isNodeScoped(error) bool { return false }
