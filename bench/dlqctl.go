package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backends/all"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/effects/rediseffects"
)

// dlqctl runs the real `dlqctl stats` command, as a subprocess of the
// built binary and in-process through cmd.Execute.
type dlqctl struct {
	bin      string // the built binary
	launcher string
	config   string // an empty config file, so that no user or ./dlqctl.yaml config applies
	env      []string
}

func newDlqctl(h helpers, tmp string) (*dlqctl, error) {
	config := filepath.Join(tmp, "empty-config.yaml")
	if err := os.WriteFile(config, nil, 0o644); err != nil {
		return nil, err
	}
	// The subprocess gets the bench's environment without anything that
	// would change what dlqctl does or how its runtime behaves.
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "DLQCTL_") || k == "GOGC" || k == "GOMEMLIMIT" || k == "GODEBUG" || k == "GOMAXPROCS" {
			continue
		}
		env = append(env, kv)
	}
	return &dlqctl{bin: h.dlqctl, launcher: h.launcher, config: config, env: env}, nil
}

func (d *dlqctl) args(source string) []string {
	return []string{"--config", d.config, "--source", source, "stats", "-o", "json"}
}

// procRun is one subprocess run.
type procRun struct {
	Wall    time.Duration
	User    time.Duration
	Sys     time.Duration
	MaxRSS  int64 // KiB
	Anon    int64 // KiB, sampled peak RssAnon
	File    int64 // KiB, sampled peak RssFile
	Floor   int64 // KiB, the launcher's own peak
	Total   int
	Doc     map[string]any
	Command string
}

// runProcess runs `dlqctl … stats -o json` under the launcher (see
// launch.go) and checks its exit code.
func (d *dlqctl) runProcess(ctx context.Context, source string) (procRun, error) {
	args := d.args(source)
	r := procRun{Command: d.bin + " " + strings.Join(args, " ")}
	l, err := launch(ctx, d.launcher, d.env, append([]string{d.bin}, args...)...)
	if err != nil {
		return r, fmt.Errorf("%s: %v\n%s", r.Command, err, l.Stderr)
	}
	r.Wall, r.User, r.Sys, r.MaxRSS = l.Wall, l.User, l.Sys, l.MaxRSS
	r.Anon, r.File, r.Floor = l.PeakAnon, l.PeakFile, l.LauncherHWM
	r.Doc, r.Total, err = parseStats(l.Stdout)
	return r, err
}

func (p procRun) mem() memSample {
	return memSample{Wall: p.Wall, MaxRSS: p.MaxRSS, Anon: p.Anon, File: p.File, Floor: p.Floor}
}

// inProcRun is one in-process run, with the allocations it made.
type inProcRun struct {
	Wall   time.Duration
	Allocs uint64 // heap objects allocated
	Bytes  uint64 // heap bytes allocated
	Total  int
}

// runInProcess runs the same command line through cmd.Execute, with the
// same factory as main but its streams in buffers and no DLQCTL_* variables
// from the environment. cpuProfile/memProfile, when set, are written for
// this run.
func (d *dlqctl) runInProcess(ctx context.Context, source, cpuProfile, memProfile string) (inProcRun, error) {
	var stdout, stderr bytes.Buffer
	f := &cmd.Factory{Deps: cmd.Deps{
		Backends: all.Registry(), Effects: effects.Stores{Redis: rediseffects.Store{}},
		IO:  &cmd.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr},
		Now: time.Now,
		Getenv: func(k string) string {
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
			return inProcRun{}, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return inProcRun{}, err
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// dlqctl may set the collector's pace and memory limit for its
	// command; cmd.Execute puts them back (internal/tuning), so that a raw
	// loop run afterwards in this process runs as Go's defaults have it.
	start := time.Now()
	code := cmd.Execute(ctx, f, d.args(source))
	wall := time.Since(start)
	runtime.ReadMemStats(&after)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if memProfile != "" {
		if err := writeHeapProfile(memProfile); err != nil {
			return inProcRun{}, err
		}
	}
	r := inProcRun{Wall: wall, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}
	if code != 0 {
		return r, fmt.Errorf("in-process dlqctl stats exited %d: %s", code, stderr.String())
	}
	var err error
	_, r.Total, err = parseStats(stdout.Bytes())
	return r, err
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// The "allocs" profile: every sampled allocation since the program
	// started, so read it with -sample_index=alloc_space or alloc_objects.
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

func parseStats(out []byte) (map[string]any, int, error) {
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, 0, fmt.Errorf("stats output is not JSON: %v: %.200s", err, out)
	}
	if doc["schema"] != "dlqctl.stats/v1" {
		return doc, 0, fmt.Errorf("stats output has schema %v", doc["schema"])
	}
	total, ok := doc["total"].(float64)
	if !ok {
		return doc, 0, fmt.Errorf("stats output has no total")
	}
	return doc, int(total), nil
}
