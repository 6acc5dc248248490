package backend

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestSamePIDSpace: a PID is checked only where it names a process of
// the checker's own PID space. A lease from another PID namespace or boot
// under the same host name is one from elsewhere; a lease that records
// neither (an older dlqctl's) is judged by its host name, as before.
func TestSamePIDSpace(t *testing.T) {
	me := LeaseHolder{RunID: "b", PID: 1, Host: "node-1", BootID: "boot-1", PIDNamespace: "4026532175"}
	for _, c := range []struct {
		name string
		held LeaseHolder
		want bool
	}{
		{"same host, boot and namespace", LeaseHolder{Host: "node-1", BootID: "boot-1", PIDNamespace: "4026532175"}, true},
		{"another PID namespace, same host name (hostNetwork pods)", LeaseHolder{Host: "node-1", BootID: "boot-1", PIDNamespace: "4026531836"}, false},
		{"another boot of a host of that name", LeaseHolder{Host: "node-1", BootID: "boot-2", PIDNamespace: "4026532175"}, false},
		{"another host", LeaseHolder{Host: "node-2", BootID: "boot-1", PIDNamespace: "4026532175"}, false},
		{"an old lease of this host name", LeaseHolder{Host: "node-1"}, true},
		{"an old lease of another host", LeaseHolder{Host: "node-2"}, false},
		{"a boot ID only (macOS)", LeaseHolder{Host: "node-1", BootID: "boot-1"}, false},
	} {
		if got := SamePIDSpace(c.held, me); got != c.want {
			t.Errorf("%s: SamePIDSpace = %v, want %v", c.name, got, c.want)
		}
	}
	// A checker that cannot place itself never checks a placed lease.
	if SamePIDSpace(LeaseHolder{Host: "node-1", BootID: "boot-1", PIDNamespace: "1"}, LeaseHolder{Host: "node-1"}) {
		t.Error("a checker without a boot ID or namespace checked a lease that has them")
	}
}

// TestThisProcessPlacesItself: the holder this process writes carries its
// PID, host name and, where the OS gives them, the values that
// SamePIDSpace compares; two calls agree.
func TestThisProcessPlacesItself(t *testing.T) {
	a, b := ThisProcess("r", time.Unix(1, 0)), ThisProcess("r", time.Unix(1, 0))
	if a != b || a.PID == 0 || a.Host == "" || !SamePIDSpace(a, b) {
		t.Fatalf("ThisProcess: %+v then %+v", a, b)
	}
}

// TestHolderGone: a lease of our own run ID is taken over early only from
// a process that is provably gone: this one, or a dead PID in this PID
// space. A live process, or one elsewhere that cannot be looked for, is
// waited out.
func TestHolderGone(t *testing.T) {
	me := ThisProcess("r", time.Now())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	elsewhere := me
	elsewhere.PIDNamespace += "-other"
	for _, c := range []struct {
		name string
		held LeaseHolder
		want bool
	}{
		{"this very process", me, true},
		{"a dead process here", withPID(me, dead.Process.Pid), true},
		{"a live process here (the parent of this test)", withPID(me, os.Getppid()), false},
		{"a process in another PID namespace", withPID(elsewhere, dead.Process.Pid), false},
		{"a process on another host", LeaseHolder{RunID: "r", PID: dead.Process.Pid, Host: me.Host + "-other"}, false},
	} {
		if got := HolderGone(c.held, me); got != c.want {
			t.Errorf("%s: HolderGone = %v, want %v", c.name, got, c.want)
		}
	}
}

func withPID(h LeaseHolder, pid int) LeaseHolder { h.PID = pid; return h }
