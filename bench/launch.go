package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Every measured subprocess runs under bench/launcher (see its package
// comment for why the bench cannot read a child's peak RSS itself).

// helpers are the binaries the bench builds: dlqctl, the launcher and the
// raw Redis loop as a program of its own.
type helpers struct {
	dlqctl, launcher, rawredis string
}

// moduleDir is the root of the dlqctl module.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run the benchmark from inside the dlqctl module")
	}
	return filepath.Dir(gomod), nil
}

// buildHelpers builds the binaries into dir with `go build`; dlqctlBin,
// when set, is used instead of building dlqctl.
func buildHelpers(dir, dlqctlBin string) (helpers, error) {
	root, err := moduleDir()
	if err != nil {
		return helpers{}, err
	}
	h := helpers{
		dlqctl:   filepath.Join(dir, "dlqctl"),
		launcher: filepath.Join(dir, "launcher"),
		rawredis: filepath.Join(dir, "rawredis"),
	}
	pkgs := [][2]string{{h.launcher, "./bench/launcher"}, {h.rawredis, "./bench/rawredis"}}
	if dlqctlBin != "" {
		h.dlqctl = dlqctlBin
	} else {
		pkgs = append(pkgs, [2]string{h.dlqctl, "."})
	}
	for _, p := range pkgs {
		build := exec.Command("go", "build", "-o", p[0], p[1])
		build.Dir = root
		if p[1] == "." {
			// dlqctl as releases build it (.goreleaser.yaml): static, no
			// cgo. A cgo build is a dynamically linked executable whose
			// pages the kernel may map differently, so it is not what
			// users run.
			build.Args = []string{"go", "build", "-trimpath", "-o", p[0], p[1]}
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if msg, err := build.CombinedOutput(); err != nil {
			return h, fmt.Errorf("go build %s: %v\n%s", p[1], err, msg)
		}
	}
	return h, nil
}

// launched is bench/launcher's report plus the command's output.
type launched struct {
	Wall        time.Duration
	User        time.Duration
	Sys         time.Duration
	MaxRSS      int64 // ru_maxrss, KiB
	PeakAnon    int64 // KiB, sampled
	PeakFile    int64 // KiB, sampled
	LauncherHWM int64 // KiB
	Code        int
	Err         string
	Stdout      []byte `json:"-"`
	Stderr      []byte `json:"-"`
}

// launch runs argv under the launcher with env.
func launch(ctx context.Context, launcher string, env []string, argv ...string) (launched, error) {
	return launchTo(ctx, launcher, env, nil, argv...)
}

// launchTo is launch with the command's stdout going to out (a pipe to
// it) instead of into launched.Stdout; nil keeps it there.
func launchTo(ctx context.Context, launcher string, env []string, out io.Writer, argv ...string) (launched, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return launched{}, err
	}
	defer pr.Close()
	c := exec.CommandContext(ctx, launcher, argv...)
	c.Env = env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if out != nil {
		c.Stdout = out
	}
	c.ExtraFiles = []*os.File{pw}
	if err := c.Start(); err != nil {
		pw.Close()
		return launched{}, err
	}
	pw.Close()
	var r launched
	decErr := json.NewDecoder(pr).Decode(&r)
	err = c.Wait()
	r.Stdout, r.Stderr = stdout.Bytes(), stderr.Bytes()
	switch {
	case decErr != nil:
		return r, fmt.Errorf("launcher: no report (%v): %v", decErr, err)
	case r.Err != "":
		return r, fmt.Errorf("%s: %s", argv[0], r.Err)
	case r.Code != 0:
		return r, fmt.Errorf("%s exited %d", strings.Join(argv, " "), r.Code)
	}
	return r, nil
}
