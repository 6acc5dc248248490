package testproc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestInOtherPIDNamespace: a process started so is PID 1 of a PID
// namespace that is not this one, under this host name, and cannot see
// this process.
func TestInOtherPIDNamespace(t *testing.T) {
	mine, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	c := exec.Command("sh", "-c", `echo "$$"; readlink /proc/self/ns/pid; hostname; kill -0 "$0" 2>/dev/null && echo visible || echo invisible`, strconv.Itoa(os.Getpid()))
	InOtherPIDNamespace(c)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("start in another PID namespace (needs root, or unprivileged user namespaces): %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 4 || got[0] != "1" || got[1] == mine || !strings.HasPrefix(got[1], "pid:[") || got[2] != host || got[3] != "invisible" {
		t.Fatalf("the child says %q; want pid 1, a PID namespace other than %s, host %s, this process invisible", got, mine, host)
	}
}
