// CEL oracle for labkit.cel tests (not imported by labkit): evaluates DRA CEL selectors with the real
// k8s.io/dynamic-resource-allocation/cel code (v0.37.2 = Kubernetes 1.37). Input and output:
// JSON lines. Build: go build -o cel-oracle . ; then LABKIT_CEL_ORACLE=$PWD/cel-oracle pytest -m oracle
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type input struct {
	Expr     string                                                    `json:"expr"`
	Driver   string                                                    `json:"driver"`
	Attrs    map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	Multi    *bool                                                     `json:"allowMultipleAllocations"`
	CC       bool                                                      `json:"consumableCapacity"`
	LT       bool                                                      `json:"listTypeAttributes"`
	New      bool                                                      `json:"new"`
}

type output struct {
	Result  string `json:"result"` // true false compile runtime
	Message string `json:"message,omitempty"`
	MaxCost uint64 `json:"maxCost"`
	Cost    uint64 `json:"cost"`
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var in input
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: in.CC, EnableListTypeAttributes: in.LT})
		opts := dracel.Options{}
		if in.New {
			t := environment.NewExpressions
			opts.EnvType = &t
		}
		res := c.CompileCELExpression(in.Expr, opts)
		if res.Error != nil {
			enc.Encode(output{Result: "compile", Message: res.Error.Detail, MaxCost: res.MaxCost})
			continue
		}
		ok, details, err := res.DeviceMatches(context.Background(), dracel.Device{Driver: in.Driver, Attributes: in.Attrs, Capacity: in.Capacity, AllowMultipleAllocations: in.Multi})
		out := output{MaxCost: res.MaxCost}
		if details != nil && details.ActualCost() != nil {
			out.Cost = *details.ActualCost()
		}
		if err != nil {
			out.Result = "runtime"
			out.Message = dracel.EnhanceRuntimeError(err).Error()
		} else {
			out.Result = fmt.Sprint(ok)
		}
		enc.Encode(out)
	}
}
