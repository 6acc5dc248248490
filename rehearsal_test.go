package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunbookRehearsals runs the rehearsals of docs/runbook.md as they are
// written: the sh blocks of each rehearsal section, in one bash with -e,
// from a view of the checkout (every top-level entry linked into a
// temporary folder, so that what the commands write lands there). The
// servers are the ones the runbook starts: redis-server on the port the
// section names, which the test swaps for a free one (the documented port
// is held by a stand-in meanwhile, as another Redis on the machine would
// hold it), and scripts/kafka.sh, scripts/elasticmq.sh, scripts/rabbitmq.sh
// and scripts/nats.sh on free ones. Not under -short: it starts Kafka and
// ElasticMQ.
func TestRunbookRehearsals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the servers the runbook starts, Kafka and ElasticMQ among them")
	}
	doc, err := os.ReadFile("docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		heading string
		port    string   // the fixed port the section documents, swapped for a free one
		stop    string   // the server to stop if the script fails before it does
		says    []string // what the output must show besides success
	}{
		// The gate trip the section shows: a halt by the gate it names.
		{"## 0. Rehearse it on your machine", "REDIS_PORT=6391", "", []string{"stopped by the duplicate-effect gate", "apply exited 3"}},
		{"## Rehearse it on Kafka", "", "scripts/kafka.sh stop rehearsal/kafka", nil},
		{"## Rehearse it on a Kafka share group", "", "scripts/kafka.sh stop rehearsal/kafka-share", nil},
		{"## Rehearse it on SQS", "", "scripts/elasticmq.sh stop rehearsal/sqs", nil},
		{"## Rehearse it on RabbitMQ", "", "scripts/rabbitmq.sh stop rehearsal/rabbitmq", nil},
		{"## Rehearse it on NATS", "", "scripts/nats.sh stop rehearsal/nats", nil},
	} {
		t.Run(strings.TrimLeft(c.heading, "# 0."), func(t *testing.T) {
			script := shBlocks(t, section(t, string(doc), c.heading))
			if c.port != "" {
				script = freePort(t, script, c.port)
			}
			dir := checkoutView(t)
			if c.stop != "" {
				t.Cleanup(func() {
					cmd := exec.Command("bash", "-c", c.stop+" 2>/dev/null || true")
					cmd.Dir = dir
					_ = cmd.Run()
				})
			}
			out, err := runRehearsal(t, dir, script)
			if err != nil {
				t.Fatalf("the rehearsal as written failed: %v\n%s", err, out)
			}
			for _, bad := range []string{"command not found", "No such file"} {
				if strings.Contains(out, bad) {
					t.Errorf("the rehearsal says %q:\n%s", bad, out)
				}
			}
			for _, want := range c.says {
				if !strings.Contains(out, want) {
					t.Errorf("the rehearsal does not say %q:\n%s", want, out)
				}
			}
		})
	}
}

// freePort swaps the documented NAME=PORT assignment in script for a free
// port, and holds the documented port meanwhile with a listener that
// drops every connection, as another server on the machine would hold
// it: a rehearsal that still reached for it would fail.
func freePort(t *testing.T, script, assignment string) string {
	t.Helper()
	name, port, _ := strings.Cut(assignment, "=")
	script = "\n" + script
	if !strings.Contains(script, "\n"+assignment) {
		t.Fatalf("the section no longer sets %s: the test cannot move its server to a free port", assignment)
	}
	if l, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return strings.Replace(script, "\n"+assignment, "\n"+name+"="+free, 1)[1:]
}

// section is the text under heading, up to the next heading of its level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/runbook.md has no %q section", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// shBlocks joins the section's ```sh blocks.
func shBlocks(t *testing.T, text string) string {
	t.Helper()
	var b strings.Builder
	for {
		i := strings.Index(text, "```sh\n")
		if i < 0 {
			break
		}
		text = text[i+len("```sh\n"):]
		j := strings.Index(text, "```")
		if j < 0 {
			t.Fatal("an sh block without its end")
		}
		b.WriteString(text[:j])
		text = text[j+3:]
	}
	if b.Len() == 0 {
		t.Fatal("the section has no sh block")
	}
	return b.String()
}

// checkoutView links every top-level entry of the checkout into a
// temporary folder, which the rehearsal runs in.
func checkoutView(t *testing.T) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runRehearsal runs script in bash -e in its own process group, which is
// ended afterwards (what the script left running in the background), and
// bounds it.
func runRehearsal(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DLQCTL_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	// Servers the scripts start stop with this test, whatever happens.
	pid := fmt.Sprint(os.Getpid())
	cmd.Env = append(env, "KAFKA_WATCH_PID="+pid, "ELASTICMQ_WATCH_PID="+pid, "RABBITMQ_WATCH_PID="+pid, "AWS_EC2_METADATA_DISABLED=true")
	// A file, not a pipe: what the script leaves in the background holds
	// its output open, and Wait would wait for that too.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	read := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer func() { _ = syscall.Kill(-pgid, syscall.SIGTERM) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return read(), err
	case <-time.After(8 * time.Minute):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return read(), fmt.Errorf("still running after 8 minutes")
	}
}
