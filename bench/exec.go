package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/effects/rediseffects"
)

// approvalKey signs the bench's redrive approvals (DLQCTL_APPROVAL_KEY).
const approvalKey = "dlqctl-bench-approval-key-0123456789abcdef"

// launchArgs runs `dlqctl ARGS…` under the launcher with the bench's clean
// environment plus extra variables, and checks its exit code.
func (d *dlqctl) launchArgs(ctx context.Context, extraEnv []string, args ...string) (launched, error) {
	env := slices.Concat(d.env, extraEnv)
	l, err := launch(ctx, d.launcher, env, append([]string{d.bin}, args...)...)
	if err != nil {
		return l, fmt.Errorf("dlqctl %s: %v\n%s", strings.Join(args, " "), err, l.Stderr)
	}
	return l, nil
}

// execInProcess runs `dlqctl ARGS…` through cmd.Execute in this process,
// with env as its only DLQCTL_* variables, and a CPU profile and/or the
// allocation profile written for this run when the paths are set.
func (d *dlqctl) execInProcess(ctx context.Context, env map[string]string, args []string, cpuProfile, memProfile string) (time.Duration, []byte, error) {
	var stdout, stderr bytes.Buffer
	f := &cmd.Factory{Deps: cmd.Deps{
		Backends: all.Registry(), Effects: effects.Stores{Redis: rediseffects.Store{}},
		IO:  &cmd.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr},
		Now: time.Now,
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if strings.HasPrefix(k, "DLQCTL_") {
				return ""
			}
			return os.Getenv(k)
		},
		Build: cmd.BuildInfo{Version: "bench"},
	}}
	if cpuProfile != "" {
		pf, err := os.Create(cpuProfile)
		if err != nil {
			return 0, nil, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return 0, nil, err
		}
	}
	start := time.Now()
	code := cmd.Execute(ctx, f, args)
	wall := time.Since(start)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if memProfile != "" {
		if err := writeHeapProfile(memProfile); err != nil {
			return wall, nil, err
		}
	}
	if code != 0 {
		return wall, stdout.Bytes(), fmt.Errorf("in-process dlqctl %s exited %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return wall, stdout.Bytes(), nil
}
