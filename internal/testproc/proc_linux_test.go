//go:build linux

package testproc

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestFreezeThawKill: a process frozen is stopped until thawed, and a
// killed one is gone.
func TestFreezeThawKill(t *testing.T) {
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	pid := c.Process.Pid
	if err := Freeze(pid); err != nil {
		t.Fatal(err)
	}
	if st := ProcState(pid); st != 'T' {
		t.Errorf("frozen: state %q, want T", st)
	}
	if err := Thaw(pid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ProcState(pid) == 'T'; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still stopped 5 s after a thaw")
		}
	}
	if err := KillProcess(pid); err != nil {
		t.Fatal(err)
	}
	if st := ProcState(pid); st != 0 && st != 'Z' {
		t.Errorf("killed: state %q", st)
	}
}

// TestDrainAndCut: a connection between a process (bash holding it open,
// reading nothing) and this one is found from both ends; what bash has
// not read is taken away; the cut ends it here too; and this process is
// found as the listener of its port.
func TestDrainAndCut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if pid, err := ListenerPID(port); err != nil || pid != os.Getpid() {
		t.Errorf("ListenerPID(%d) = %d, %v; want this process, %d", port, pid, err, os.Getpid())
	}
	c := exec.Command("bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(port)+"; sleep 30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	var ends []TCPConn
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ends, _, err = Between(c.Process.Pid, os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if len(ends) == 1 && ends[0].RxQueue == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections between bash and this process: %+v, want one with 6 bytes unread", ends)
		}
	}
	if n, err := Drain(c.Process.Pid, ends); err != nil || n != 6 {
		t.Fatalf("Drain: %d bytes, %v; want 6", n, err)
	}
	if err := Cut(ends); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the connection still reads after the cut")
	}
}

// TestPIDNamespace: a command run under the prefix is process 1 of its
// own namespace, where this process is not visible.
func TestPIDNamespace(t *testing.T) {
	prefix, err := PIDNamespace()
	if err != nil {
		t.Fatal(err)
	}
	script := "echo $$; test -e /proc/" + strconv.Itoa(os.Getpid()) + " && echo visible || echo hidden"
	out, err := exec.Command(prefix[0], append(prefix[1:], "sh", "-c", script)...).CombinedOutput()
	if err != nil || string(out) != "1\nhidden\n" {
		t.Errorf("in the namespace: %q, %v; want process 1, this process hidden", out, err)
	}
}
