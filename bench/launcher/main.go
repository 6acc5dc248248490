// Command launcher runs one command and reports, as JSON on file
// descriptor 3, its wall time (start to exit), CPU time and peak RSS.
//
//	launcher COMMAND [ARG...]
//
// Why a launcher: the peak RSS of a subprocess cannot be read from the
// benchmark's own wait4. Go starts a child with clone(CLONE_VM|CLONE_VFORK),
// and at execve Linux folds the high-water RSS of the address space the
// child leaves (the parent's, tens to hundreds of MiB in the benchmark)
// into the child's ru_maxrss. This launcher is a small program, so the
// floor it leaves in its child's ru_maxrss is a few MiB; it reports its own
// peak (VmHWM) as that floor.
//
// It also samples the command's /proc/PID/status every 10ms and reports
// the largest RssAnon and RssFile seen: the process's own memory apart
// from the pages of its executable mapped from the page cache.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Report is what the launcher writes on fd 3.
type Report struct {
	Wall        time.Duration
	User        time.Duration
	Sys         time.Duration
	MaxRSS      int64 // ru_maxrss, KiB
	PeakAnon    int64 // largest sampled RssAnon, KiB
	PeakFile    int64 // largest sampled RssFile, KiB
	LauncherHWM int64 // the launcher's own VmHWM, KiB, when it started the command
	Code        int
	Err         string `json:",omitempty"`
}

func main() {
	out := os.NewFile(3, "report")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: launcher COMMAND [ARG...]")
		os.Exit(2)
	}
	var r Report
	r.LauncherHWM, _ = status(os.Getpid(), "VmHWM")
	c := exec.Command(os.Args[1], os.Args[2:]...)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	if err := c.Start(); err != nil {
		r.Err, r.Code = err.Error(), -1
		json.NewEncoder(out).Encode(r)
		os.Exit(0)
	}
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if anon, ok := status(c.Process.Pid, "RssAnon"); ok {
					r.PeakAnon = max(r.PeakAnon, anon)
				}
				if file, ok := status(c.Process.Pid, "RssFile"); ok {
					r.PeakFile = max(r.PeakFile, file)
				}
			}
		}
	}()
	err := c.Wait()
	r.Wall = time.Since(start)
	close(done)
	<-sampled
	if c.ProcessState == nil {
		r.Err, r.Code = err.Error(), -1
	} else {
		r.Code = c.ProcessState.ExitCode()
		r.User, r.Sys = c.ProcessState.UserTime(), c.ProcessState.SystemTime()
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.MaxRSS = ru.Maxrss
		}
	}
	json.NewEncoder(out).Encode(r)
}

// status reads one "Name: N kB" line of /proc/PID/status.
func status(pid int, name string) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if v, ok := bytes.CutPrefix(line, []byte(name+":")); ok {
			v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
			n, err := strconv.ParseInt(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
