package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// lineCounter counts the lines written to it and keeps the first one, so
// that a listing of a million rows is checked without being held.
type lineCounter struct {
	lines int
	first []byte
}

func (c *lineCounter) Write(p []byte) (int, error) {
	if c.lines == 0 {
		head, _, _ := bytes.Cut(p, []byte("\n"))
		c.first = append(c.first, head...)
	}
	c.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// runListPiped runs `dlqctl … list --limit 0` under the launcher with its
// stdout a pipe, so it writes the tab-separated table, and checks that a
// header and want rows came out.
func (d *dlqctl) runListPiped(ctx context.Context, source string, want int) (memSample, error) {
	args := []string{"--config", d.config, "--source", source, "list", "--limit", "0"}
	command := d.bin + " " + strings.Join(args, " ")
	var out lineCounter
	l, err := launchTo(ctx, d.launcher, d.env, &out, append([]string{d.bin}, args...)...)
	if err != nil {
		return memSample{}, fmt.Errorf("%s: %v\n%s", command, err, l.Stderr)
	}
	if !bytes.HasPrefix(out.first, []byte("ID\tEVENT ID\t")) {
		return memSample{}, fmt.Errorf("%s: first line %q is not the tab-separated header", command, out.first)
	}
	if out.lines != want+1 {
		return memSample{}, fmt.Errorf("%s: %d lines, want a header and %d rows", command, out.lines, want)
	}
	return memSample{Wall: l.Wall, MaxRSS: l.MaxRSS, Anon: l.PeakAnon, File: l.PeakFile, Floor: l.LauncherHWM}, nil
}
